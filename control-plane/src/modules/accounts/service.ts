import type { DatabasePool } from 'slonik';
import { createSharedCache, type InvalidationBus } from '../../platform/cache.js';
import type { KeyCheck, KeyKind, KeyMode, KeyResolver, Plan, Principal } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import { errors, ServiceError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { digestsEqual, newSecret, secretHint, sha256 } from '../../platform/secrets.js';
import type { Db } from '../../platform/transaction.js';
import {
  KEY_PATTERN,
  KEY_PREFIX,
  type KeyPrincipalRow,
  type KeyRow,
  PLAN_DAILY_REQUEST_CAP,
} from './schema.js';
import { accountsStore } from './store.js';

export function dailyRequestCap(plan: Plan, customCap: number | null): number {
  return plan === 'scale' && customCap !== null ? customCap : PLAN_DAILY_REQUEST_CAP[plan];
}

const customCapRefused = () =>
  new ServiceError('invalid_request', 'only Scale accounts take a custom daily request cap');

/**
 * Keys are read on every request: resolved keys are kept in process for a minute, and a revocation
 * or a plan change reaches every replica at once through the invalidation bus. Unknown keys are not
 * kept (made-up ones would push the real ones out); the address's lockout bounds their lookups.
 */
const KEY_CACHE_TTL_MS = 60_000;
const KEY_CACHE_ENTRIES = 100_000;

const principalOf = (row: KeyPrincipalRow): Principal => ({
  keyId: row.key_id,
  appId: row.app_id,
  accountId: row.account_id,
  mode: row.mode,
  plan: row.plan,
  dailyRequestCap: dailyRequestCap(row.plan, row.daily_request_cap),
});

/** A key's last_used_at is written at most once a minute per key and replica: minute precision is what a person reads. */
const KEY_USE_RECORD_MS = 60_000;

/** Cache entries of keys looked up by id (user tokens name the key that minted them), beside hashes. */
const byId = (keyId: string) => `id:${keyId}`;

export function createAccountsService(deps: {
  pool: DatabasePool;
  clock: Clock;
  bus: InvalidationBus;
  onError?: (error: unknown) => void;
}) {
  const store = accountsStore(deps.pool);
  const useRecorded = new Map<string, number>();

  /** Off the request's path: a failed write loses a minute of "last used", never a request. */
  function recordUse(keyId: string) {
    const now = deps.clock.now();
    if (now.getTime() - (useRecorded.get(keyId) ?? 0) < KEY_USE_RECORD_MS) return;
    useRecorded.set(keyId, now.getTime());
    store.touchKey(keyId, now).catch((error: unknown) => deps.onError?.(error));
  }
  const keyCache = createSharedCache<KeyPrincipalRow | null>({
    name: 'keys',
    ttlMs: KEY_CACHE_TTL_MS,
    maxEntries: KEY_CACHE_ENTRIES,
    bus: deps.bus,
    // Not an unknown key: a flood of made-up ones would push the real ones out.
    keeps: (row) => row !== null,
  });

  // Apps are never renamed or deleted, so an app's name needs no invalidation, only a bound.
  const appNames = createSharedCache<string | null>({
    name: 'app-names',
    ttlMs: KEY_CACHE_TTL_MS,
    maxEntries: KEY_CACHE_ENTRIES,
    bus: deps.bus,
  });

  async function requireApp(appId: string, db: Db = deps.pool) {
    const app = await accountsStore(db).findApp(appId);
    if (!app) throw errors.notFound(`App ${appId}`);
    return app;
  }

  /**
   * The row is found by the key's hash; the hash is then compared in constant time. `beforeLookup`
   * runs before a key missing from the cache is looked up (the address's lockout).
   */
  async function checkKey(
    token: string,
    kind: KeyKind,
    beforeLookup?: () => Promise<void>,
  ): Promise<KeyCheck> {
    const match = KEY_PATTERN.exec(token);
    if (!match) return { ok: false, refusal: 'malformed' };
    const presented = match[1] === 'pk' ? 'publishable' : 'secret';
    if (presented !== kind) return { ok: false, refusal: presented };
    const hash = sha256(token);
    const cacheKey = hash.toString('hex');
    // Each caller's own check, not inside the load that concurrent callers of the key share: one
    // locked-out address must not hand its 429 to the others.
    if (beforeLookup && !keyCache.has(cacheKey)) await beforeLookup();
    const row = await keyCache.get(cacheKey, () => store.findPrincipalByTokenHash(hash));
    if (row?.kind !== kind || !digestsEqual(row.token_hash, hash)) return { ok: false, refusal: 'unknown' };
    if (row.revoked_at !== null) return { ok: false, refusal: 'revoked' };
    recordUse(row.key_id);
    return { ok: true, principal: principalOf(row) };
  }

  const resolver: KeyResolver = {
    /** Resolves a secret key (svc_…). */
    checkSecretKey: (token, beforeLookup) => checkKey(token, 'secret', beforeLookup),
    /** Resolves a publishable key (pk_…), the only kind a client may send. */
    checkPublishableKey: (token, beforeLookup) => checkKey(token, 'publishable', beforeLookup),
  };

  /** A secret key's principal by its id, and whether it is revoked; null for no such secret key. */
  async function principalOfKey(keyId: string): Promise<(Principal & { revoked: boolean }) | null> {
    const row = await keyCache.get(byId(keyId), () => store.findPrincipalByKeyId(keyId));
    if (row?.kind !== 'secret') return null;
    return { ...principalOf(row), revoked: row.revoked_at !== null };
  }

  return {
    ...resolver,
    principalOfKey,

    createAccount: (input: { name: string; plan: Plan; dailyRequestCap?: number | null }) => {
      if (input.dailyRequestCap != null && input.plan !== 'scale') throw customCapRefused();
      return store.insertAccount({
        id: newId('acct'),
        name: input.name,
        plan: input.plan,
        dailyRequestCap: input.dailyRequestCap ?? null,
        at: deps.clock.now(),
      });
    },

    getAccount: (id: string) => store.findAccount(id),
    listAccounts: () => store.listAccounts(),

    setPlan: async (id: string, plan: Plan, customCap: number | null = null) => {
      if (customCap !== null && plan !== 'scale') throw customCapRefused();
      const account = await store.updatePlan(id, plan, customCap);
      if (!account) throw errors.notFound(`Account ${id}`);
      // Every key of the account carries its plan and cap: a rare change, so everything is dropped.
      await keyCache.clear();
      return account;
    },

    createApp: async (input: { accountId: string; name: string }) => {
      if (!(await store.findAccount(input.accountId))) throw errors.notFound(`Account ${input.accountId}`);
      return store.insertApp({
        id: newId('app'),
        accountId: input.accountId,
        name: input.name,
        at: deps.clock.now(),
      });
    },

    getApp: (id: string) => store.findApp(id),
    /** The app's name, kept in process: what a message template shows on every send. */
    appName: (id: string) => appNames.get(id, async () => (await store.findApp(id))?.name ?? null),
    listApps: (accountId: string) => store.listApps(accountId),

    /** Creates a key and returns its token: the only time a secret token exists outside the caller's hands. */
    createKey: async (
      input: { appId: string; kind: KeyKind; mode: KeyMode },
      db: Db = deps.pool,
    ): Promise<{ key: KeyRow; token: string }> => {
      await requireApp(input.appId, db);
      const token = newSecret(KEY_PREFIX[input.kind][input.mode]);
      const hash = sha256(token);
      const key = await accountsStore(db).insertKey({
        id: newId('key'),
        appId: input.appId,
        kind: input.kind,
        mode: input.mode,
        tokenHash: hash,
        tokenHint: secretHint(token),
        publishableToken: input.kind === 'publishable' ? token : null,
        at: deps.clock.now(),
      });
      return { key, token };
    },

    listKeys: async (appId: string) => {
      await requireApp(appId);
      return store.listKeys(appId);
    },

    /** Revokes a key: every replica refuses it from the next request on. */
    revokeKey: async (keyId: string) => {
      const revoked = await store.revokeKey(keyId, deps.clock.now());
      if (!revoked) throw errors.notFound(`Key ${keyId}`);
      await keyCache.invalidate(revoked.tokenHash.toString('hex'));
      await keyCache.invalidate(byId(keyId));
      return revoked.key;
    },

    resolver,
  };
}

export type AccountsService = ReturnType<typeof createAccountsService>;
