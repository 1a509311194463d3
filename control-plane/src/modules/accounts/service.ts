import type { CommonQueryMethods, DatabasePool } from 'slonik';
import type { Clock } from '../../lib/clock.js';
import { newId } from '../../lib/random.js';
import { digestsEqual, newSecret, secretHint, sha256 } from '../../lib/secrets.js';
import {
  KEY_PATTERN,
  KEY_PREFIX,
  type KeyKind,
  type KeyMode,
  type KeyRow,
  PLAN_DAILY_REQUEST_CAP,
  type Plan,
  type Principal,
} from './schema.js';
import { accountsStore } from './store.js';

export class AccountsError extends Error {
  override name = 'AccountsError';
}

/** Why a presented key was refused: each case gets its own 401 message. */
export type KeyRefusal = 'malformed' | 'publishable' | 'secret' | 'unknown' | 'revoked';

export type KeyCheck = { ok: true; principal: Principal } | { ok: false; refusal: KeyRefusal };

export function dailyRequestCap(plan: Plan, customCap: number | null): number {
  return plan === 'scale' && customCap !== null ? customCap : PLAN_DAILY_REQUEST_CAP[plan];
}

export function createAccountsService(deps: { pool: DatabasePool; clock: Clock }) {
  const store = accountsStore(deps.pool);

  async function requireApp(appId: string, db: CommonQueryMethods = deps.pool) {
    const app = await accountsStore(db).findApp(appId);
    if (!app) throw new AccountsError(`no app ${appId}`);
    return app;
  }

  /** The database finds the row by hash; the hash is then compared in constant time. */
  async function checkKey(token: string, kind: KeyKind): Promise<KeyCheck> {
    const match = KEY_PATTERN.exec(token);
    if (!match) return { ok: false, refusal: 'malformed' };
    const presented = match[1] === 'pk' ? 'publishable' : 'secret';
    if (presented !== kind) return { ok: false, refusal: presented };
    const hash = sha256(token);
    const row = await store.findPrincipalByTokenHash(hash);
    if (row?.kind !== kind || !digestsEqual(row.token_hash, hash)) return { ok: false, refusal: 'unknown' };
    if (row.revoked_at !== null) return { ok: false, refusal: 'revoked' };
    return {
      ok: true,
      principal: {
        keyId: row.key_id,
        appId: row.app_id,
        accountId: row.account_id,
        mode: row.mode,
        plan: row.plan,
        dailyRequestCap: dailyRequestCap(row.plan, row.daily_request_cap),
      },
    };
  }

  return {
    createAccount: (input: { name: string; plan: Plan; dailyRequestCap?: number | null }) => {
      if (input.dailyRequestCap != null && input.plan !== 'scale') {
        throw new AccountsError('only Scale accounts take a custom daily request cap');
      }
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
      if (customCap !== null && plan !== 'scale')
        throw new AccountsError('only Scale accounts take a custom daily request cap');
      const account = await store.updatePlan(id, plan, customCap);
      if (!account) throw new AccountsError(`no account ${id}`);
      return account;
    },

    createApp: async (input: { accountId: string; name: string }) => {
      if (!(await store.findAccount(input.accountId)))
        throw new AccountsError(`no account ${input.accountId}`);
      return store.insertApp({
        id: newId('app'),
        accountId: input.accountId,
        name: input.name,
        at: deps.clock.now(),
      });
    },

    getApp: (id: string) => store.findApp(id),
    listApps: (accountId: string) => store.listApps(accountId),

    /** Creates a key and returns its token: the only time a secret token exists outside the caller's hands. */
    createKey: async (
      input: { appId: string; kind: KeyKind; mode: KeyMode },
      db: CommonQueryMethods = deps.pool,
    ): Promise<{ key: KeyRow; token: string }> => {
      await requireApp(input.appId, db);
      const token = newSecret(KEY_PREFIX[input.kind][input.mode]);
      const key = await accountsStore(db).insertKey({
        id: newId('key'),
        appId: input.appId,
        kind: input.kind,
        mode: input.mode,
        tokenHash: sha256(token),
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

    revokeKey: async (keyId: string) => {
      const key = await store.revokeKey(keyId, deps.clock.now());
      if (!key) throw new AccountsError(`no key ${keyId}`);
      return key;
    },

    /** Resolves a secret key (svc_…). */
    checkSecretKey: (token: string) => checkKey(token, 'secret'),

    /** Resolves a publishable key (pk_…), the only kind a client may send. */
    checkPublishableKey: (token: string) => checkKey(token, 'publishable'),
  };
}

export type AccountsService = ReturnType<typeof createAccountsService>;
