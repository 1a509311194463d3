import { createHmac, randomInt, timingSafeEqual } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DatabasePool } from 'slonik';
import { UniqueIntegrityConstraintViolationError } from 'slonik';
import type {
  DeliveryStatus,
  InboundMessage,
  MessagingComponent,
} from '../../adapters/messaging-component.js';
import type { KeyMode, Principal, UserPrincipal } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors, ServiceError } from '../../platform/errors.js';
import { idOfNode, isExternalId, nodeOf, parseScopedNode, scopedNode } from '../../platform/identities.js';
import { newId } from '../../platform/ids.js';
import type { Outbox } from '../../platform/outbox.js';
import { pruneInBatches } from '../../platform/pruning.js';
import { inTransaction, type Transaction } from '../../platform/transaction.js';
import type { AccountsService } from '../accounts/service.js';
import type { RealtimeService } from '../realtime/service.js';
import type { SocialService } from '../social/service.js';
import {
  DEFAULT_OTP_TEMPLATE,
  E164_PATTERN,
  MESSAGING_LIMITS,
  OTP_DIGITS,
  OTP_MAX_FAILURES,
  OTP_VALIDITY_SECONDS,
} from './schema.js';
import { messagingStore } from './store.js';

type Scope = { appId: string; mode: KeyMode };
type Reason = 'unknown_phone' | 'no_chat_account' | 'blocked' | 'opted_out' | 'mailbox_full';
/** What became of a send: `arrivedAt` once it reached a client's session. */
type Outcome = { delivered: boolean; reason: Reason | null; arrivedAt: Date | null };

/** Sends are kept this long: the limits read a day of them; the rest is an app's recent history. */
const SEND_RETENTION_DAYS = 30;
/**
 * How long an arrival notice waits, each time, for its send to commit; the last try is after about 5 s.
 * (Only a message kept offline has a notice: it is read at a login, which may follow the send at once.)
 */
const ARRIVAL_RETRIES_MS = [50, 200, 750, 2_000, 2_000, 0];

/** The app's own messaging identity: `<prefix>.app`; a profile's: `<prefix>.profile.<node of its id>`. */
const ACCOUNT_IDENTITY = 'app';
const PROFILE_IDENTITY = 'profile.';
const ACCOUNT_SENDER = 'account';
const profileSender = (userId: string) => `profile:${userId}`;

/** Anything that begins with "+" and a digit is a phone number (and must be E.164). */
const PHONE_LIKE = /^\+[0-9]/;
const E164 = new RegExp(E164_PATTERN);

/** Replies that change a user's promo consent (any case, alone in the message). */
const STOP_WORDS = new Set(['STOP', 'UNSUBSCRIBE', 'STOPALL', 'CANCEL', 'END', 'QUIT']);
const START_WORDS = new Set(['START', 'UNSTOP', 'SUBSCRIBE']);

const REASONS: Record<Exclude<DeliveryStatus, 'online' | 'stored'>, Reason> = {
  'no-account': 'no_chat_account',
  blocked: 'blocked',
  refused: 'mailbox_full',
};

const phoneTaken = () =>
  new ServiceError('conflict', 'Another user of the app has registered this phone number', {
    code: 'PHONE_TAKEN',
  });

/** Refuses a send past a limit: 429 with the seconds until the limit-th newest send leaves the window. */
function checkLimit(
  newestFirst: readonly Date[],
  limit: { limit: number; windowSeconds: number },
  what: string,
  now: Date,
) {
  if (newestFirst.length < limit.limit) return;
  const oldest = newestFirst[limit.limit - 1]!;
  const retryAfter = Math.max(
    1,
    Math.ceil((oldest.getTime() + limit.windowSeconds * 1000 - now.getTime()) / 1000),
  );
  throw errors.rateLimited(what, retryAfter);
}

/**
 * Whether `to` is a phone number (anything that begins with "+" and a digit); a 422 naming `to` when
 * it is neither valid E.164 nor a user id.
 */
function isPhone(to: string, otherwise: string): boolean {
  if (PHONE_LIKE.test(to)) {
    if (!E164.test(to))
      throw errors.invalidField(
        'body',
        'to',
        'a phone number must be E.164: "+", a country code not starting with 0, at most 15 digits',
      );
    return true;
  }
  if (!isExternalId(to)) throw errors.invalidField('body', 'to', otherwise);
  return false;
}

export interface MessagingSettings {
  chatDomain: string;
  /** The key the codes' hashes are made with (derived from the sealing key). */
  codeKey: Buffer;
}

export function createMessagingService(deps: {
  pool: DatabasePool;
  clock: Clock;
  outbox: Outbox;
  cursors: Cursors;
  accounts: AccountsService;
  realtime: RealtimeService;
  social: SocialService;
  component: MessagingComponent;
  settings: MessagingSettings;
  onError: (error: unknown) => void;
}) {
  const hashCode = (messageId: string, code: string) =>
    createHmac('sha256', deps.settings.codeKey).update(`${messageId}\0${code}`).digest();

  /** Who `to` is: the user (directly, or by the phone they registered), and whom the limits count. */
  async function resolveRecipient(db: Transaction, scope: Scope, to: string) {
    if (!isPhone(to, 'must be a profile id (the app’s user id) or an E.164 phone number'))
      return { userId: to as string | null, recipientKey: `user:${to}` };
    const userId = await messagingStore(db).userOfPhone(scope, to);
    return { userId, recipientKey: userId === null ? `phone:${to}` : `user:${userId}` };
  }

  const since = (now: Date, windowSeconds: number) => new Date(now.getTime() - windowSeconds * 1000);

  /**
   * Hands one message to ejabberd; `delivered` false names why. A message handed to an online session
   * has arrived now (`arrivedAt`): ejabberd sends notices only for those read later from offline storage.
   */
  async function deliver(
    chatPrefix: string,
    message: { id: string; identity: string; userId: string; body: string; marker: Record<string, string> },
    options: { onBehalfOf?: string; transient?: boolean } = {},
  ): Promise<Outcome> {
    const status = await deps.component.deliver({
      id: message.id,
      from: `${chatPrefix}.${message.identity}`,
      to: `${scopedNode(chatPrefix, message.userId)}@${deps.settings.chatDomain}`,
      body: message.body,
      marker: message.marker,
      ...options,
    });
    if (status === 'online') return { delivered: true, reason: null, arrivedAt: deps.clock.now() };
    if (status === 'stored') return { delivered: true, reason: null, arrivedAt: null };
    return { delivered: false, reason: REASONS[status], arrivedAt: null };
  }

  /** The sender a messaging identity's local part names (`account` or `profile:<id>`), or null. */
  function senderOfIdentity(
    localPart: string,
  ): { prefix: string; sender: string; profileId?: string } | null {
    const dot = localPart.indexOf('.');
    if (dot <= 0) return null;
    const prefix = localPart.slice(0, dot);
    const name = localPart.slice(dot + 1);
    if (name === ACCOUNT_IDENTITY) return { prefix, sender: ACCOUNT_SENDER };
    if (!name.startsWith(PROFILE_IDENTITY)) return null;
    const profileId = idOfNode(name.slice(PROFILE_IDENTITY.length));
    return profileId === null ? null : { prefix, sender: profileSender(profileId), profileId };
  }

  /** A user's reply to a messaging identity: `message.received`, and STOP/START change the consent. */
  async function receive(message: InboundMessage) {
    const [bare = ''] = message.from.split('/');
    const at = bare.lastIndexOf('@');
    if (at <= 0 || bare.slice(at + 1) !== deps.settings.chatDomain) return;
    const user = parseScopedNode(bare.slice(0, at));
    const identity = senderOfIdentity(message.to);
    // mod_svc_scope already refuses a message to another app's identity; this is the second lock.
    if (!user || !identity || identity.prefix !== user.prefix) return;
    const settings = await deps.realtime.findByChatPrefix(user.prefix);
    if (!settings) return;
    const scope = { appId: settings.app_id, mode: settings.mode };
    const word = message.body.trim().toUpperCase();
    const asked = STOP_WORDS.has(word) ? 'stop' : START_WORDS.has(word) ? 'start' : null;
    const consent = await inTransaction(
      deps.pool,
      async (tx) => {
        const store = messagingStore(tx);
        const now = deps.clock.now();
        // A reply sent before one already handled (by another replica, as ejabberd spreads them)
        // changes nothing: the user's last word holds. One without ejabberd's stamp applies as it comes.
        const consent =
          asked !== null &&
          (message.sentAtMicros === undefined ||
            (await store.noteConsentReply(scope, user.id, identity.sender, message.sentAtMicros)))
            ? asked
            : null;
        if (consent === 'stop') await store.optOut(scope, user.id, identity.sender, 'chat', now);
        if (consent === 'start') await store.optIn(scope, user.id, identity.sender);
        await deps.outbox.emit(tx, {
          appId: scope.appId,
          mode: scope.mode,
          type: 'message.received',
          data: {
            from: { user_id: user.id },
            to:
              identity.profileId === undefined
                ? { identity: 'account' }
                : { identity: 'profile', profile_id: identity.profileId },
            text: message.body,
            received_at: now.toISOString(),
            ...(consent ? { consent: consent === 'stop' ? 'opted_out' : 'opted_in' } : {}),
          },
          ...(identity.profileId === undefined ? {} : { profileId: identity.profileId }),
        });
        return consent;
      },
      deps.onError,
    );
    if (consent) {
      // The sender confirms in the same conversation, as a carrier would (not charged, not counted).
      const text =
        consent === 'stop'
          ? 'You will get no more promotional messages from this sender. Reply START to get them again.'
          : 'You will get promotional messages from this sender again. Reply STOP to stop them.';
      await deliver(settings.chat_prefix, {
        id: newId('msg'),
        identity: message.to.slice(message.to.indexOf('.') + 1),
        userId: user.id,
        body: text,
        marker: { purpose: 'consent' },
      });
    }
  }

  /**
   * The server's notice that a send reached the recipient's client: `otp.delivered` for an OTP. An
   * online client gets the message before the send's transaction commits, so a notice that finds no
   * send yet looks again a little later.
   */
  async function arrived(notice: { id: string; to: string }) {
    for (const wait of ARRIVAL_RETRIES_MS) {
      if (await noteArrival(notice)) return;
      await sleep(wait);
    }
  }

  /** False when the send is not (yet) there to note. */
  async function noteArrival(notice: { id: string; to: string }) {
    return inTransaction(
      deps.pool,
      async (tx) => {
        const now = deps.clock.now();
        const sent = await messagingStore(tx).markArrived(notice.id, now);
        if (!sent) return false;
        if (sent.kind === 'otp')
          await deps.outbox.emit(
            tx,
            otpDelivered(
              { appId: sent.app_id, mode: sent.mode },
              notice.id,
              sent.recipient,
              sent.user_id,
              now,
            ),
          );
        return true;
      },
      deps.onError,
    );
  }

  /** An OTP's arrival at the recipient's client (`at`): at its send, or later from offline storage. */
  const otpDelivered = (scope: Scope, id: string, to: string, userId: string | null, at: Date) => ({
    appId: scope.appId,
    mode: scope.mode,
    type: 'otp.delivered' as const,
    data: { id, to, user_id: userId, delivered_at: at.toISOString() },
  });

  /**
   * The replies of one user to one identity, handled one after another in the order they came: a STOP
   * then a START (or the other way) must leave the consent of the last. Across replicas the order
   * holds when ejabberd sends one user's replies to one of them (docs/messaging.md).
   */
  const replying = new Map<string, Promise<void>>();
  deps.component.onInbound((message) => {
    const key = `${message.from.split('/')[0]}\t${message.to}`;
    const turn = (replying.get(key) ?? Promise.resolve()).then(() => receive(message)).catch(deps.onError);
    replying.set(key, turn);
    void turn.finally(() => {
      if (replying.get(key) === turn) replying.delete(key);
    });
  });
  deps.component.onArrival((notice) => void arrived(notice).catch(deps.onError));

  /** The stored sender a path names: `account`, or `@username` of an existing profile (404 otherwise). */
  async function senderKey(tx: Transaction, user: UserPrincipal, sender: string) {
    if (sender === 'account') return ACCOUNT_SENDER;
    return profileSender((await deps.social.profileNamed(user, sender.slice(1), tx)).user_id);
  }

  return {
    start: () => deps.component.start(),
    stop: () => deps.component.stop(),

    sendOtp: async (principal: Principal, input: { to: string; template?: string }, tx: Transaction) => {
      const template = input.template ?? DEFAULT_OTP_TEMPLATE;
      if (!template.includes('{code}'))
        throw errors.invalidField('body', 'template', 'must contain {code}, where the code goes');
      const store = messagingStore(tx);
      const recipient = await resolveRecipient(tx, principal, input.to);
      await store.lockLimit(principal, `otp\t${recipient.recipientKey}`);
      const now = deps.clock.now();
      const { otpPerRecipientDay: day, otpPerRecipientShort: short } = MESSAGING_LIMITS;
      const sends = await store.recentSends(
        principal,
        { kind: 'otp', recipientKey: recipient.recipientKey },
        since(now, day.windowSeconds),
        day.limit,
      );
      checkLimit(sends, day, `At most ${day.limit} codes a day to one recipient`, now);
      checkLimit(
        sends.filter((at) => at > since(now, short.windowSeconds)),
        short,
        `At most ${short.limit} codes in 10 minutes to one recipient`,
        now,
      );
      const id = newId('msg');
      const expiresAt = new Date(now.getTime() + OTP_VALIDITY_SECONDS * 1000);
      let outcome: Outcome = { delivered: false, reason: 'unknown_phone', arrivedAt: null };
      let codeHash: Buffer | null = null;
      if (recipient.userId !== null) {
        const settings = await deps.realtime.ensure(principal);
        const code = String(randomInt(0, 10 ** OTP_DIGITS)).padStart(OTP_DIGITS, '0');
        // The app's name is read only when the template shows it.
        const appName = template.includes('{app}')
          ? ((await deps.accounts.appName(principal.appId)) ?? '')
          : '';
        // One pass, so that a {code} inside the app's name is not filled in as well.
        const body = template.replace(/\{(code|app)\}/g, (_match, name: string) =>
          name === 'code' ? code : appName,
        );
        outcome = await deliver(
          settings.chat_prefix,
          {
            id,
            identity: ACCOUNT_IDENTITY,
            userId: recipient.userId,
            body,
            marker: { purpose: 'otp', expires: expiresAt.toISOString() },
          },
          { transient: true },
        );
        codeHash = outcome.delivered ? hashCode(id, code) : null;
      }
      // Only a delivered code replaces the live one: an undelivered send leaves the earlier code working.
      // One that reached an online client at once says so in the statement that records it.
      const liveCode = codeHash
        ? {
            hash: codeHash,
            expiresAt,
            ...(outcome.arrivedAt && {
              delivered: deps.outbox.inStatement(
                otpDelivered(principal, id, input.to, recipient.userId, outcome.arrivedAt),
              ),
            }),
          }
        : undefined;
      const { deliveries } = await store.recordSend(
        principal,
        {
          id,
          kind: 'otp',
          sender: ACCOUNT_SENDER,
          recipient: input.to,
          recipientKey: recipient.recipientKey,
          userId: recipient.userId,
          channel: 'in_app',
          ...outcome,
          at: now,
        },
        liveCode,
      );
      liveCode?.delivered?.made(tx, deliveries);
      return {
        id,
        status: 'sent' as const,
        channel: 'in_app' as const,
        cost_usd: 0,
        delivered: outcome.delivered,
        ...(outcome.reason ? { reason: outcome.reason } : { expires_at: expiresAt.toISOString() }),
      };
    },

    /** True once for the right code within its time; false for anything else, without saying why. */
    verifyOtp: async (principal: Principal, input: { to: string; code: string }) => {
      isPhone(input.to, 'must be the profile id or E.164 phone number the code was sent to');
      return inTransaction(deps.pool, async (tx) => {
        const store = messagingStore(tx);
        const live = await store.lockedCode(principal, input.to);
        // The hash is made whether or not there is a code: the answer takes as long either way.
        const presented = hashCode(live?.message_id ?? 'none', input.code);
        if (!live) return { verified: false };
        if (live.expires_at <= deps.clock.now()) {
          await store.endCode(principal, input.to);
          return { verified: false };
        }
        if (timingSafeEqual(presented, live.code_hash)) {
          await store.endCode(principal, input.to);
          return { verified: true };
        }
        if (live.failed_attempts + 1 >= OTP_MAX_FAILURES) await store.endCode(principal, input.to);
        else await store.countFailure(principal, input.to);
        return { verified: false };
      });
    },

    sendPromo: async (
      principal: Principal,
      input: { to: string; text: string; via?: 'account' | 'profile'; from?: string },
      tx: Transaction,
    ) => {
      const via = input.via ?? 'account';
      if (via === 'profile' && input.from === undefined)
        throw errors.invalidField('body', 'from', 'is required with via profile: the sending profile’s id');
      if (via === 'account' && input.from !== undefined)
        throw errors.invalidField('body', 'from', 'is only for via profile');
      const store = messagingStore(tx);
      let username: string | null = null;
      if (input.from !== undefined) {
        const sending = { ...principal, userId: input.from };
        username = (await deps.social.ownProfile(sending, tx, () => errors.notFound('Profile'))).username;
      }
      const sender = input.from === undefined ? ACCOUNT_SENDER : profileSender(input.from);
      const recipient = await resolveRecipient(tx, principal, input.to);
      // Always the sender's lock first, then the recipient's: no two sends wait for each other in a circle.
      await store.lockLimit(principal, `promo\t${sender}`);
      await store.lockLimit(principal, `promo\t${recipient.recipientKey}`);
      const now = deps.clock.now();
      const { promoPerSender: perSender, promoPerRecipientFromSender: perRecipient } = MESSAGING_LIMITS;
      checkLimit(
        await store.recentSends(
          principal,
          { kind: 'promo', sender },
          since(now, perSender.windowSeconds),
          perSender.limit,
        ),
        perSender,
        `At most ${perSender.limit} promos a day from one sender`,
        now,
      );
      checkLimit(
        await store.recentSends(
          principal,
          { kind: 'promo', recipientKey: recipient.recipientKey, sender },
          since(now, perRecipient.windowSeconds),
          perRecipient.limit,
        ),
        perRecipient,
        `At most ${perRecipient.limit} promo a day to one recipient from the same sender`,
        now,
      );
      const id = newId('msg');
      let outcome: Outcome = { delivered: false, reason: 'unknown_phone', arrivedAt: null };
      if (recipient.userId !== null) {
        if (await store.isOptedOut(principal, recipient.userId, sender)) {
          outcome = { delivered: false, reason: 'opted_out', arrivedAt: null };
        } else {
          const settings = await deps.realtime.ensure(principal);
          outcome = await deliver(
            settings.chat_prefix,
            {
              id,
              identity:
                input.from === undefined ? ACCOUNT_IDENTITY : `${PROFILE_IDENTITY}${nodeOf(input.from)}`,
              userId: recipient.userId,
              body: input.text,
              marker: {
                purpose: 'promo',
                channel: via,
                ...(username === null ? {} : { profile: username }),
              },
            },
            // A user who blocked the profile's own chat address has blocked its promos too.
            input.from === undefined
              ? {}
              : { onBehalfOf: `${scopedNode(settings.chat_prefix, input.from)}@${deps.settings.chatDomain}` },
          );
        }
      }
      await store.recordSend(principal, {
        id,
        kind: 'promo',
        sender,
        recipient: input.to,
        recipientKey: recipient.recipientKey,
        userId: recipient.userId,
        channel: via,
        ...outcome,
        at: now,
      });
      return {
        id,
        status: 'sent' as const,
        channel: via,
        cost_usd: 0,
        delivered: outcome.delivered,
        ...(outcome.reason ? { reason: outcome.reason } : {}),
      };
    },

    /** Sends older than their retention (they and their codes go), and codes past their time. */
    prune: async () => {
      const now = deps.clock.now();
      const store = messagingStore(deps.pool);
      const sends = await pruneInBatches((limit) =>
        store.pruneSends(new Date(now.getTime() - SEND_RETENTION_DAYS * 86_400_000), limit),
      );
      const codes = await pruneInBatches((limit) => store.pruneCodes(now, limit));
      return { pruned: sends.pruned + codes.pruned };
    },

    // ----- phones ---------------------------------------------------------------------------------

    /** The app user who registered a phone, or null. */
    userOfPhone: (principal: Principal, phone: string) =>
      messagingStore(deps.pool).userOfPhone(principal, phone),

    getPhone: async (principal: Principal, userId: string) => {
      const row = await messagingStore(deps.pool).phoneOf(principal, userId);
      if (!row) throw errors.notFound('Phone');
      return presentPhone(row);
    },

    /** The app's server sets a user's phone, taking it from any other user of the app. */
    setPhoneByApp: async (principal: Principal, userId: string, phone: string, tx: Transaction) => {
      const store = messagingStore(tx);
      await store.releasePhone(principal, phone, userId);
      return presentPhone(await store.setPhone(principal, userId, phone, 'app', deps.clock.now()));
    },

    /** A user claims a phone for themselves: 409 when another user holds it. */
    setPhoneByUser: async (user: UserPrincipal, phone: string, tx: Transaction) => {
      try {
        return presentPhone(
          await messagingStore(tx).setPhone(user, user.userId, phone, 'user', deps.clock.now()),
        );
      } catch (error) {
        if (error instanceof UniqueIntegrityConstraintViolationError) throw phoneTaken();
        throw error;
      }
    },

    deletePhone: async (principal: Principal, userId: string, tx: Transaction) => {
      if (!(await messagingStore(tx).deletePhone(principal, userId))) throw errors.notFound('Phone');
      return { ok: true as const, id: userId };
    },

    // ----- promo consent ----------------------------------------------------------------------------

    optOuts: async (user: UserPrincipal, query: { limit: number; cursor?: string }) => {
      const after = deps.cursors.decode(query.cursor);
      const rows = await messagingStore(deps.pool).optOuts(user, user.userId, query.limit, after);
      return deps.cursors.page(
        rows.map((row) => ({ ...row, id: row.sender })),
        query.limit,
        (row) => ({
          sender:
            row.sender === ACCOUNT_SENDER ? 'account' : `@${row.username ?? nodeOf(row.sender.slice(8))}`,
          source: row.source,
          created_at: row.created_at.toISOString(),
        }),
      );
    },

    optOut: async (user: UserPrincipal, sender: string, tx: Transaction) => {
      const now = deps.clock.now();
      await messagingStore(tx).optOut(user, user.userId, await senderKey(tx, user, sender), 'api', now);
      return { sender, source: 'api' as const, created_at: now.toISOString() };
    },

    optIn: async (user: UserPrincipal, sender: string, tx: Transaction) => {
      const key = await senderKey(tx, user, sender);
      if (!(await messagingStore(tx).optIn(user, user.userId, key))) throw errors.notFound('Opt-out');
      return { ok: true as const, id: sender };
    },
  };
}

function presentPhone(row: { user_id: string; phone: string; set_by: 'app' | 'user'; updated_at: Date }) {
  return {
    user_id: row.user_id,
    phone: row.phone,
    set_by: row.set_by,
    updated_at: row.updated_at.toISOString(),
  };
}

export type MessagingService = ReturnType<typeof createMessagingService>;
