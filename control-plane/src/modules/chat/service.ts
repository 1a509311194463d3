import type { Redis } from 'ioredis';
import type { DatabasePool } from 'slonik';
import type { EjabberdClient } from '../../adapters/ejabberd.js';
import { redisScript } from '../../adapters/redis.js';
import {
  type Accrual,
  applyOncePerAccount,
  FIELD_SEPARATOR,
  pendingKey,
  priceParts,
  readPrice,
} from '../../platform/accrual.js';
import type { AdmissionScript } from '../../platform/admission.js';
import type { AppScope, KeyMode, Principal } from '../../platform/caller.js';
import { type Clock, utcDay } from '../../platform/clock.js';
import { orgKeyOfIdentity, parseChatIdentity, scopedNode } from '../../platform/identities.js';
import type { Metering, UsagePrice } from '../../platform/metering.js';
import { metricKey } from '../../platform/price-catalogue.js';
import type { Prices } from '../../platform/prices.js';
import { pruneInBatches } from '../../platform/pruning.js';
import { newSecret, sha256 } from '../../platform/secrets.js';
import { type Standing, standingKey } from '../../platform/standing.js';
import type { RealtimeAppRow } from '../realtime/schema.js';
import type { RealtimeService } from '../realtime/service.js';
import { chatStore } from './store.js';

export interface ChatSettings {
  chatDomain: string;
  mucDomain: string;
  wsUrl: string;
}

/**
 * A user's one live credential: a Redis hash of the password's SHA-256 (hex) and its expiry, under
 * the JID's local part (what a login names).
 */
const credentialKey = (localPart: string) => `svc:chat:credential:${localPart}`;
/** The users of an app and mode counted active in a month (a set that outlives the month it names). */
const activeKey = (appId: string, mode: KeyMode, month: string) =>
  `svc:chat:active:${appId}:${mode}:${month}`;
const ACTIVE_SET_SECONDS = 35 * 86_400;

/** Accrued kinds: users given a credential (for isuser), and each user's first login of a month. */
const CHAT_USERS = 'chat-users';
const MONTHLY_ACTIVE = 'chat-mau';

/**
 * A new credential replaces the user's earlier one in one write, and the user is noted for the
 * chat_users record, in the mint's admission round trip (K: credential, pending chat users;
 * A: password hash, expiry ms, TTL ms, chat-users field).
 */
const MINT: AdmissionScript = {
  name: 'chat-mint',
  body: `
redis.call('HSET', K[1], 'hash', A[1], 'expires', A[2])
redis.call('PEXPIRE', K[1], A[3])
redis.call('HSET', K[2], A[4], 1)`,
};

/**
 * A login, answered in one round trip (KEYS: credential, account standing, the month's active set,
 * pending monthly active users; ARGV: presented hash, now ms, live '1', user id, pending field).
 * Digests are compared in constant time; the first login of a month is accrued for billing.
 */
const LOGIN = `
local stored = redis.call('HMGET', KEYS[1], 'hash', 'expires')
if not stored[1] then return 'unknown' end
local a, b = stored[1], ARGV[1]
if #a ~= #b then return 'refused' end
local diff = 0
for i = 1, #a do diff = bit.bor(diff, bit.bxor(string.byte(a, i), string.byte(b, i))) end
if diff ~= 0 then return 'refused' end
if tonumber(stored[2]) <= tonumber(ARGV[2]) then return 'expired' end
if ARGV[3] == '1' then
  local standing = redis.call('GET', KEYS[2])
  if not standing then return 'standing-unknown' end
  if string.sub(standing, 1, 1) ~= '1' then return 'unfunded' end
end
if redis.call('SADD', KEYS[3], ARGV[4]) == 1 then
  redis.call('EXPIRE', KEYS[3], ${ACTIVE_SET_SECONDS})
  redis.call('HSET', KEYS[4], ARGV[5], 1)
end
return 'ok'`;

/** Credentials deleted per Redis command when identities are revoked together. */
const REVOKE_BATCH = 1_000;

type Admit = (script: AdmissionScript, keys: string[], args: (string | number)[]) => Promise<unknown>;

// User ids cannot hold the separator (a tab): the id rule refuses control characters.
const field = (...parts: (string | number)[]) => parts.join(FIELD_SEPARATOR);

export function createChatService(deps: {
  pool: DatabasePool;
  redis: Redis;
  clock: Clock;
  ejabberd: EjabberdClient;
  realtime: RealtimeService;
  metering: Metering;
  accrual: Accrual;
  prices: Prices;
  standing: Standing;
  settings: ChatSettings;
  /** The org (its id) of an org identity's chat key, for its monthly active users' usage line. */
  orgOfChatKey: (chatKey: string) => Promise<string | null>;
}) {
  const jidOf = (localPart: string) => `${localPart}@${deps.settings.chatDomain}`;
  const login = redisScript<string>(deps.redis, LOGIN);

  deps.accrual.register(CHAT_USERS, async (_batch, entries) => {
    await chatStore(deps.pool).addUsers(
      entries.map(([entry]) => {
        const [appId = '', mode, userId = '', at] = entry.split(FIELD_SEPARATOR);
        return { appId, mode: mode as KeyMode, userId, at: new Date(Number(at)) };
      }),
    );
  });

  // Monthly active users: recorded once per user and month (the table's key), charged for the new ones
  // at the price of their login.
  deps.accrual.register(MONTHLY_ACTIVE, async (batch, entries) => {
    type Login = { appId: string; mode: KeyMode; month: string; userId: string; at: Date; price: UsagePrice };
    const byAccount = new Map<string, Login[]>();
    for (const [entry] of entries) {
      const [accountId = '', appId = '', mode, month = '', at, userId = '', ...price] =
        entry.split(FIELD_SEPARATOR);
      const logins = byAccount.get(accountId) ?? [];
      logins.push({
        appId,
        mode: mode as KeyMode,
        month,
        userId,
        at: new Date(Number(at)),
        price: readPrice(price),
      });
      byAccount.set(accountId, logins);
    }
    await applyOncePerAccount(deps.pool, batch, byAccount, async (tx, accountId, logins) => {
      const added = await chatStore(tx).addMonthlyActiveUsers(logins);
      const priceOf = new Map(
        logins.map((login) => [field(login.appId, login.mode, login.userId), login.price]),
      );
      const byPayer = new Map<
        string,
        { appId: string; mode: KeyMode; day: string; price: UsagePrice; orgKey: string | null; count: number }
      >();
      for (const user of added) {
        const price = priceOf.get(field(user.app_id, user.mode, user.user_id))!;
        // An org identity is an active user of its org: its line is the org's.
        const orgKey = orgKeyOfIdentity(user.user_id);
        const key = field(user.app_id, user.mode, user.day, orgKey ?? '', ...priceParts(price));
        const group = byPayer.get(key) ?? {
          appId: user.app_id,
          mode: user.mode,
          day: user.day,
          price,
          orgKey,
          count: 0,
        };
        group.count += 1;
        byPayer.set(key, group);
      }
      const charges = [];
      for (const { appId, mode, day, price, orgKey, count } of byPayer.values()) {
        const orgId = orgKey === null ? null : await deps.orgOfChatKey(orgKey);
        charges.push({
          payer: { accountId, appId, mode, ...(orgId ? { orgId } : {}) },
          usages: [{ product: 'chat', metric: 'monthly_active_users', quantity: count, price }],
          day,
        });
      }
      await deps.metering.meterAll(tx, charges);
    });
  });

  /**
   * A login's questions, answered from the settings cache and one Redis round trip: the same for a
   * user's personal identity and an org member's (counted as an active user of its own).
   */
  async function authenticate(localPart: string, password: string): Promise<boolean> {
    const user = parseChatIdentity(localPart);
    if (!user) return false;
    const settings = await deps.realtime.findByChatPrefix(user.prefix);
    if (!settings?.products.includes('chat')) return false;
    const userId = user.id;
    const now = deps.clock.now();
    const month = now.toISOString().slice(0, 7);
    const price = (await deps.prices.table()).get(metricKey('chat', 'monthly_active_users'))!;
    const answer = () =>
      login(
        4,
        credentialKey(localPart),
        standingKey(settings.account_id),
        activeKey(settings.app_id, settings.mode, month),
        pendingKey(MONTHLY_ACTIVE),
        sha256(password).toString('hex'),
        now.getTime(),
        settings.mode === 'live' ? '1' : '0',
        userId,
        field(
          settings.account_id,
          settings.app_id,
          settings.mode,
          month,
          now.getTime(),
          userId,
          ...priceParts(price),
        ),
      );
    let verdict = await answer();
    if (verdict === 'standing-unknown') {
      await deps.standing.load(settings.account_id);
      verdict = await answer();
    }
    return verdict === 'ok';
  }

  /** Whether ejabberd should treat the user as existing (to route messages to them when offline). */
  async function userExists(localPart: string): Promise<boolean> {
    const user = parseChatIdentity(localPart);
    if (!user) return false;
    if ((await deps.redis.exists(credentialKey(localPart))) === 1) return true;
    const settings = await deps.realtime.findByChatPrefix(user.prefix);
    return settings !== null && chatStore(deps.pool).userExists(settings.app_id, settings.mode, user.id);
  }

  /**
   * A new credential for one of the app's identities, replacing any earlier one at once. The request's
   * admission and the credential's write are one Redis round trip; no PostgreSQL.
   */
  async function mint(
    principal: Principal,
    settings: RealtimeAppRow,
    identity: { localPart: string; nickname: string; roomPrefix?: string; ttlSeconds: number; id?: string },
    admit: Admit,
  ) {
    // A personal identity's id is the user's own, given; an org identity's is read from its node.
    const id = identity.id ?? parseChatIdentity(identity.localPart)!.id;
    const now = deps.clock.now();
    const password = newSecret('');
    const expiresAt = now.getTime() + identity.ttlSeconds * 1000;
    await admit(
      MINT,
      [credentialKey(identity.localPart), pendingKey(CHAT_USERS)],
      [
        sha256(password).toString('hex'),
        expiresAt,
        identity.ttlSeconds * 1000,
        field(principal.appId, principal.mode, id, now.getTime()),
      ],
    );
    return {
      jid: jidOf(identity.localPart),
      user: identity.localPart,
      domain: deps.settings.chatDomain,
      password,
      ws: deps.settings.wsUrl,
      muc: deps.settings.mucDomain,
      room_prefix: identity.roomPrefix ?? `${settings.chat_prefix}.`,
      nickname: identity.nickname,
      mam: settings.mam,
      expires_at: new Date(expiresAt).toISOString(),
    };
  }

  return {
    /** A new credential for the user's personal identity. */
    mintCredential: async (
      principal: Principal,
      input: { user_id: string; name?: string; ttl_seconds: number },
      admit: Admit,
    ) => {
      const settings = await deps.realtime.requireProduct(principal, 'chat');
      return mint(
        principal,
        settings,
        {
          localPart: scopedNode(settings.chat_prefix, input.user_id),
          id: input.user_id,
          nickname: input.name ?? input.user_id,
          ttlSeconds: input.ttl_seconds,
        },
        admit,
      );
    },

    /** A new credential for another identity of the app's (an org member's), with its own room prefix. */
    mintIdentityCredential: async (
      principal: Principal,
      identity: { localPart: string; nickname: string; roomPrefix: string; ttlSeconds: number },
      admit: Admit,
    ) => mint(principal, await deps.realtime.requireProduct(principal, 'chat'), identity, admit),

    /** Revokes the user's credential: the next login is refused and open sessions are closed. */
    revokeCredential: async (principal: Principal, userId: string) => {
      const settings = await deps.realtime.ensure(principal);
      const localPart = scopedNode(settings.chat_prefix, userId);
      const revoked = (await deps.redis.del(credentialKey(localPart))) === 1;
      const sessionsClosed = await deps.ejabberd.revokeUser(localPart);
      return {
        ok: true as const,
        id: userId,
        jid: jidOf(localPart),
        revoked,
        sessions_closed: sessionsClosed,
      };
    },

    /** Revokes one identity of the app's: its credential goes, then its open sessions. */
    revokeIdentity: async (localPart: string) => {
      await deps.redis.del(credentialKey(localPart));
      return deps.ejabberd.revokeUser(localPart);
    },

    /**
     * Revokes identities of the app's: their credentials go, then ejabberd closes the open sessions of
     * every identity whose local part starts with `nodePrefix` (and any login that raced this).
     */
    revokeIdentities: async (localParts: readonly string[], nodePrefix: string) => {
      for (let i = 0; i < localParts.length; i += REVOKE_BATCH)
        await deps.redis.del(...localParts.slice(i, i + REVOKE_BATCH).map(credentialKey));
      return deps.ejabberd.revokePrefix(nodePrefix);
    },

    /** Makes sure the room exists in ejabberd with the app's room size and archiving. */
    ensureRoom: async (principal: Principal, room: string) => {
      const settings = await deps.realtime.requireProduct(principal, 'chat');
      const node = scopedNode(settings.chat_prefix, room);
      await deps.ejabberd.ensureRoom(node, { maxUsers: settings.max_room_size });
      await chatStore(deps.pool).addRoom(principal.appId, principal.mode, room, deps.clock.now());
      return {
        room: `${node}@${deps.settings.mucDomain}`,
        name: room,
        max_occupants: settings.max_room_size,
        mam: settings.mam,
      };
    },

    /** The names of the app's rooms in a mode. */
    roomNames: (scope: AppScope) => chatStore(deps.pool).roomNames(scope.appId, scope.mode),

    /**
     * Forgets who was active in months before the last: only the current month takes new users, and
     * the last one a batch applied just after midnight; the charges are in the ledger.
     */
    pruneMonthlyActiveUsers: () => {
      const now = deps.clock.now();
      const lastMonth = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 1, 1));
      return pruneInBatches((limit) =>
        chatStore(deps.pool).pruneMonthlyActiveUsers(utcDay(lastMonth), limit),
      );
    },

    /** ejabberd's external-auth question. Only the chat domain's users are ours to answer. */
    answerAuthCallback: async (question: {
      op: 'auth' | 'isuser';
      user: string;
      server: string;
      password?: string;
    }) => {
      if (question.server !== deps.settings.chatDomain) return false;
      const localPart = question.user.toLowerCase();
      if (question.op === 'isuser') return userExists(localPart);
      return question.password !== undefined && authenticate(localPart, question.password);
    },
  };
}

export type ChatService = ReturnType<typeof createChatService>;
