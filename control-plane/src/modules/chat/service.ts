import type { Redis } from 'ioredis';
import type { DatabasePool } from 'slonik';
import type { EjabberdClient } from '../../adapters/ejabberd.js';
import type { Clock } from '../../lib/clock.js';
import { digestsEqual, newSecret, sha256 } from '../../lib/secrets.js';
import type { Principal } from '../accounts/schema.js';
import type { BillingService, Payer } from '../billing/service.js';
import type { RealtimeService } from '../realtime/service.js';
import { chatStore } from './store.js';

export interface ChatSettings {
  chatDomain: string;
  mucDomain: string;
  wsUrl: string;
}

/** What Redis keeps of a user's one live credential: never the password, only its hash. */
interface StoredCredential {
  appId: string;
  accountId: string;
  mode: Payer['mode'];
  userId: string;
  passwordHash: string;
  expiresAt: number;
}

const credentialKey = (localPart: string) => `svc:chat:credential:${localPart}`;
/** Set once a user is counted as monthly active, so later logins of the month skip the database. */
const activeKey = (payer: Payer, month: string, userId: string) =>
  `svc:chat:active:${payer.appId}:${payer.mode}:${month}:${userId}`;

export function createChatService(deps: {
  pool: DatabasePool;
  redis: Redis;
  clock: Clock;
  ejabberd: EjabberdClient;
  realtime: RealtimeService;
  billing: BillingService;
  settings: ChatSettings;
}) {
  const jidOf = (localPart: string) => `${localPart}@${deps.settings.chatDomain}`;

  /** A login's questions, answered in order; any "no" ends it. */
  async function authenticate(localPart: string, password: string): Promise<boolean> {
    const stored = await deps.redis.get(credentialKey(localPart));
    if (stored === null) return false;
    const credential = JSON.parse(stored) as StoredCredential;
    const presented = sha256(password);
    if (!digestsEqual(presented, Buffer.from(credential.passwordHash, 'hex'))) return false;
    const now = deps.clock.now();
    if (credential.expiresAt <= now.getTime()) return false;
    const settings = await deps.realtime.ensure(credential);
    if (!settings.products.includes('chat')) return false;

    const payer: Payer = credential;
    const active = activeKey(payer, now.toISOString().slice(0, 7), credential.userId);
    if ((await deps.redis.exists(active)) === 1) return true;
    const { allowed } = await deps.billing.recordChatLogin(payer, credential.userId);
    // The marker outlives the month it names, then goes.
    if (allowed) await deps.redis.set(active, '1', 'EX', 32 * 86_400);
    return allowed;
  }

  /** Whether ejabberd should treat the user as existing (to route messages to them when offline). */
  async function userExists(localPart: string): Promise<boolean> {
    const dot = localPart.indexOf('.');
    if (dot <= 0) return false;
    const settings = await deps.realtime.findByChatPrefix(localPart.slice(0, dot));
    return (
      settings !== null &&
      chatStore(deps.pool).userExists(settings.app_id, settings.mode, localPart.slice(dot + 1))
    );
  }

  return {
    /** A new credential for the user, replacing any earlier one at once. */
    mintCredential: async (
      principal: Principal,
      input: { user_id: string; name?: string; ttl_seconds: number },
    ) => {
      const settings = await deps.realtime.requireProduct(principal, 'chat');
      await deps.billing.requireLiveBalance(principal, 'chat credentials');
      const now = deps.clock.now();
      const localPart = `${settings.chat_prefix}.${input.user_id}`;
      const password = newSecret('');
      const expiresAt = now.getTime() + input.ttl_seconds * 1000;
      const credential: StoredCredential = {
        appId: principal.appId,
        accountId: principal.accountId,
        mode: principal.mode,
        userId: input.user_id,
        passwordHash: sha256(password).toString('hex'),
        expiresAt,
      };
      await chatStore(deps.pool).addUser(principal.appId, principal.mode, input.user_id, now);
      await deps.redis.set(
        credentialKey(localPart),
        JSON.stringify(credential),
        'PX',
        input.ttl_seconds * 1000,
      );
      return {
        jid: jidOf(localPart),
        user: localPart,
        domain: deps.settings.chatDomain,
        password,
        ws: deps.settings.wsUrl,
        muc: deps.settings.mucDomain,
        room_prefix: `${settings.chat_prefix}.`,
        nickname: input.name ?? input.user_id,
        mam: settings.mam,
        expires_at: new Date(expiresAt).toISOString(),
      };
    },

    /** Revokes the user's credential: the next login is refused and open sessions are closed. */
    revokeCredential: async (principal: Principal, userId: string) => {
      const settings = await deps.realtime.ensure(principal);
      const localPart = `${settings.chat_prefix}.${userId}`;
      const revoked = (await deps.redis.del(credentialKey(localPart))) === 1;
      const sessionsClosed = await deps.ejabberd.kickUser(localPart);
      return { user_id: userId, jid: jidOf(localPart), revoked, sessions_closed: sessionsClosed };
    },

    /** Makes sure the room exists in ejabberd with the app's room size and archiving. */
    ensureRoom: async (principal: Principal, room: string) => {
      const settings = await deps.realtime.requireProduct(principal, 'chat');
      await deps.ejabberd.ensureRoom(`${settings.chat_prefix}.${room}`, { maxUsers: settings.max_room_size });
      await chatStore(deps.pool).addRoom(principal.appId, principal.mode, room, deps.clock.now());
      return {
        room: `${settings.chat_prefix}.${room}@${deps.settings.mucDomain}`,
        name: room,
        max_occupants: settings.max_room_size,
        mam: settings.mam,
      };
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
