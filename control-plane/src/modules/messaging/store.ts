import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Position } from '../../platform/cursors.js';
import { DeliveriesMade, type EventInStatement, eventPartsIfAny } from '../../platform/outbox.js';
import type { Db } from '../../platform/transaction.js';
import { CodeRow, OptOutRow, PhoneRow, SentMessageRow } from './schema.js';

interface Scope {
  appId: string;
  mode: KeyMode;
}

const Count = z.object({ count: z.number().int() });
// Made once, not at each send: zod builds a new object type every time.
const SentAt = z.object({ created_at: z.date() });
const UserId = z.object({ user_id: z.string() });

const phoneColumns = sql.fragment`user_id, phone, set_by, updated_at`;

/** SQL of phones, sends, OTP codes and promo opt-outs. */
export function messagingStore(db: Db) {
  return {
    userOfPhone: (scope: Scope, phone: string) =>
      db.maybeOneFirst(sql.type(UserId)`
        select user_id from user_phones where app_id = ${scope.appId} and mode = ${scope.mode} and phone = ${phone}`),

    phoneOf: (scope: Scope, userId: string) =>
      db.maybeOne(sql.type(PhoneRow)`
        select ${phoneColumns} from user_phones
        where app_id = ${scope.appId} and mode = ${scope.mode} and user_id = ${userId}`),

    /** Frees the phone from any other user of the app (the app's server moves it). */
    releasePhone: (scope: Scope, phone: string, exceptUserId: string) =>
      db.query(sql.unsafe`
        delete from user_phones
        where app_id = ${scope.appId} and mode = ${scope.mode} and phone = ${phone} and user_id <> ${exceptUserId}`),

    /** Sets the user's phone; a phone another user holds fails the unique constraint. */
    setPhone: (scope: Scope, userId: string, phone: string, setBy: 'app' | 'user', at: Date) =>
      db.one(sql.type(PhoneRow)`
        insert into user_phones (app_id, mode, user_id, phone, set_by, updated_at)
        values (${scope.appId}, ${scope.mode}, ${userId}, ${phone}, ${setBy}, ${sql.timestamp(at)})
        on conflict (app_id, mode, user_id) do update
          set phone = excluded.phone, set_by = excluded.set_by, updated_at = excluded.updated_at
        returning ${phoneColumns}`),

    deletePhone: async (scope: Scope, userId: string) =>
      (
        await db.query(sql.unsafe`
          delete from user_phones where app_id = ${scope.appId} and mode = ${scope.mode} and user_id = ${userId}`)
      ).rowCount > 0,

    /**
     * Serializes the sends that share a limit (one recipient's, one sender's) until the transaction
     * ends, so that two concurrent sends never both see room for one.
     */
    lockLimit: (scope: Scope, what: string) =>
      db.query(sql.unsafe`
        select pg_advisory_xact_lock(hashtextextended(${`messaging\t${scope.appId}\t${scope.mode}\t${what}`}, 0))`),

    /**
     * When each of the newest `limit` sends of a kind within the window was made, newest first: to one
     * recipient, from one sender, or both.
     */
    recentSends: (
      scope: Scope,
      sends: { kind: 'otp' | 'promo'; recipientKey?: string; sender?: string },
      since: Date,
      limit: number,
    ) =>
      db.anyFirst(sql.type(SentAt)`
        select created_at from messages
        where app_id = ${scope.appId} and mode = ${scope.mode} and kind = ${sends.kind}
          and created_at > ${sql.timestamp(since)}
          ${sends.recipientKey === undefined ? sql.fragment`` : sql.fragment`and recipient_key = ${sends.recipientKey}`}
          ${sends.sender === undefined ? sql.fragment`` : sql.fragment`and sender = ${sends.sender}`}
        order by created_at desc limit ${limit}`),

    /**
     * Records a send; with a code, in the same statement, the recipient's live code (replacing any
     * earlier one) and the code's `otp.delivered` when given. Answers the deliveries that event made.
     */
    recordSend: (
      scope: Scope,
      send: {
        id: string;
        kind: 'otp' | 'promo';
        sender: string;
        recipient: string;
        recipientKey: string;
        userId: string | null;
        channel: 'in_app' | 'account' | 'profile';
        delivered: boolean;
        reason: string | null;
        arrivedAt: Date | null;
        at: Date;
      },
      /**
       * The code a delivered OTP leaves live, and `otp.delivered` when it reached an online client at
       * once: that event goes in this statement.
       */
      code?: { hash: Buffer; expiresAt: Date; delivered?: EventInStatement },
    ): Promise<{ deliveries: number }> => {
      const record = sql.fragment`
        insert into messages (id, app_id, mode, kind, sender, recipient, recipient_key, user_id, channel,
                              delivered, reason, arrived_at, created_at)
        values (${send.id}, ${scope.appId}, ${scope.mode}, ${send.kind}, ${send.sender}, ${send.recipient},
                ${send.recipientKey}, ${send.userId}, ${send.channel}, ${send.delivered}, ${send.reason},
                ${send.arrivedAt && sql.timestamp(send.arrivedAt)}, ${sql.timestamp(send.at)})
        returning id`;
      if (!code) return db.query(sql.unsafe`${record}`).then(() => ({ deliveries: 0 }));
      const event = eventPartsIfAny(code.delivered, 'sent');
      return db.one(sql.type(DeliveriesMade)`
        with sent as (${record})${event.moreCtes}
        insert into otp_codes (app_id, mode, recipient, message_id, code_hash, expires_at)
        values (${scope.appId}, ${scope.mode}, ${send.recipient}, ${send.id}, ${sql.binary(code.hash)},
                ${sql.timestamp(code.expiresAt)})
        on conflict (app_id, mode, recipient) do update
          set message_id = excluded.message_id, code_hash = excluded.code_hash,
              expires_at = excluded.expires_at, failed_attempts = 0
        returning ${event.deliveries} as deliveries`);
    },

    /** The recipient's code, locked until the transaction ends (one verification at a time). */
    lockedCode: (scope: Scope, recipient: string) =>
      db.maybeOne(sql.type(CodeRow)`
        select message_id, code_hash, expires_at, failed_attempts from otp_codes
        where app_id = ${scope.appId} and mode = ${scope.mode} and recipient = ${recipient}
        for update`),

    endCode: (scope: Scope, recipient: string) =>
      db.query(sql.unsafe`
        delete from otp_codes where app_id = ${scope.appId} and mode = ${scope.mode} and recipient = ${recipient}`),

    countFailure: (scope: Scope, recipient: string) =>
      db.query(sql.unsafe`
        update otp_codes set failed_attempts = failed_attempts + 1
        where app_id = ${scope.appId} and mode = ${scope.mode} and recipient = ${recipient}`),

    /** Notes the first arrival of a send at a client; null when unknown or already noted. */
    markArrived: (messageId: string, at: Date) =>
      db.maybeOne(sql.type(SentMessageRow)`
        update messages set arrived_at = ${sql.timestamp(at)}
        where id = ${messageId} and arrived_at is null
        returning app_id, mode, kind, recipient, user_id, sender`),

    isOptedOut: (scope: Scope, userId: string, sender: string) =>
      db.exists(sql.type(z.object({ exists: z.boolean() }))`
        select 1 from promo_opt_outs
        where app_id = ${scope.appId} and mode = ${scope.mode} and user_id = ${userId} and sender = ${sender}`),

    optOut: (scope: Scope, userId: string, sender: string, source: 'chat' | 'api', at: Date) =>
      db.query(sql.unsafe`
        insert into promo_opt_outs (app_id, mode, user_id, sender, source, created_at)
        values (${scope.appId}, ${scope.mode}, ${userId}, ${sender}, ${source}, ${sql.timestamp(at)})
        on conflict do nothing`),

    /**
     * Notes a consent reply's send time (microseconds); false when a reply sent later was noted
     * already, so that this older one changes nothing. Waits for a reply of the same user to the
     * same sender being handled meanwhile, then judges against it.
     */
    noteConsentReply: async (scope: Scope, userId: string, sender: string, sentAtMicros: number) =>
      (
        await db.query(sql.unsafe`
          insert into promo_consent_replies (app_id, mode, user_id, sender, sent_at_us)
          values (${scope.appId}, ${scope.mode}, ${userId}, ${sender}, ${sentAtMicros})
          on conflict (app_id, mode, user_id, sender) do update set sent_at_us = excluded.sent_at_us
          where promo_consent_replies.sent_at_us < excluded.sent_at_us`)
      ).rowCount > 0,

    optIn: async (scope: Scope, userId: string, sender: string) =>
      (
        await db.query(sql.unsafe`
          delete from promo_opt_outs
          where app_id = ${scope.appId} and mode = ${scope.mode} and user_id = ${userId} and sender = ${sender}`)
      ).rowCount > 0,

    /** A user's opt-outs newest first, with the username of each profile sender. */
    optOuts: (scope: Scope, userId: string, limit: number, after?: Position) =>
      db.any(sql.type(OptOutRow)`
        select o.sender, p.username, o.source, o.created_at
        from promo_opt_outs o
        left join profiles p
          on o.sender like 'profile:%' and p.app_id = o.app_id and p.mode = o.mode
             and p.user_id = substr(o.sender, 9)
        where o.app_id = ${scope.appId} and o.mode = ${scope.mode} and o.user_id = ${userId}
          ${
            after
              ? sql.fragment`and (o.created_at, o.sender) < (${sql.timestamp(after.createdAt)}, ${after.id})`
              : sql.fragment``
          }
        order by o.created_at desc, o.sender desc
        limit ${limit + 1}`),

    /** Sends made before `before` (limits read a day of them), with their codes; at most `limit`. */
    pruneSends: (before: Date, limit: number) =>
      db.oneFirst(sql.type(Count)`
        with gone as (
          delete from messages where ctid in (
            select ctid from messages where created_at < ${sql.timestamp(before)} limit ${limit})
          returning 1
        )
        select count(*)::int as count from gone`),

    /** Codes past their five minutes that nobody tried again; at most `limit`. */
    pruneCodes: (now: Date, limit: number) =>
      db.oneFirst(sql.type(Count)`
        with gone as (
          delete from otp_codes where ctid in (
            select ctid from otp_codes where expires_at <= ${sql.timestamp(now)} limit ${limit})
          returning 1
        )
        select count(*)::int as count from gone`),
  };
}
