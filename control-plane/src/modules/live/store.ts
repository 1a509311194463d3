import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Db } from '../../platform/transaction.js';
import { type Kind, OpenSessionRow, type Quality } from './schema.js';

const openColumns = sql.fragment`
  s.participant_sid, s.room, s.identity, s.app_id, s.account_id, s.mode, s.kind, s.declared_quality, q.quality as published_quality,
  s.org_id, s.joined_at, s.last_seen_at, s.missing_since`;

/** SQL of LiveKit events and participant sessions. */
export function liveStore(db: Db) {
  return {
    /** Records an event id; false when it was handled before (a retried delivery). */
    claimEvent: async (id: string, event: string, at: Date) =>
      (await db.maybeOneFirst(
        sql.type(z.object({ claimed: z.boolean() }))`
          insert into livekit_events (id, event, received_at) values (${id}, ${event}, ${sql.timestamp(at)})
          on conflict do nothing returning true as claimed`,
      )) === true,

    /** Deletes up to `limit` events received before `before`; answers how many went. */
    pruneEvents: async (before: Date, limit: number) =>
      (
        await db.query(sql.unsafe`
          delete from livekit_events where id in (
            select id from livekit_events where received_at < ${sql.timestamp(before)} limit ${limit})`)
      ).rowCount,

    /** Up to `limit` sessions that ended before `before`, with their published quality; answers how many. */
    pruneEndedSessions: (before: Date, limit: number) =>
      db.oneFirst(sql.type(z.object({ count: z.number() }))`
        with gone as (
          delete from live_sessions where participant_sid in (
            select participant_sid from live_sessions where left_at < ${sql.timestamp(before)} limit ${limit})
          returning participant_sid
        ), quality as (
          delete from live_published_quality q using gone where q.participant_sid = gone.participant_sid
        )
        select count(*)::int as count from gone`),

    /**
     * Up to `limit` published qualities first reported before `before` whose session never came (their
     * session's prune takes the others); answers how many went.
     */
    pruneOrphanedQualities: async (before: Date, limit: number) =>
      (
        await db.query(sql.unsafe`
          delete from live_published_quality where participant_sid in (
            select q.participant_sid from live_published_quality q
            where q.reported_at < ${sql.timestamp(before)}
              and not exists (select 1 from live_sessions s where s.participant_sid = q.participant_sid)
            limit ${limit})`)
      ).rowCount,

    openSession: (session: {
      participantSid: string;
      room: string;
      identity: string;
      appId: string;
      accountId: string;
      mode: KeyMode;
      kind: Kind;
      publisher: boolean;
      declaredQuality: Quality;
      orgId: string | null;
      joinedAt: Date;
    }) =>
      db.query(sql.unsafe`
        insert into live_sessions (participant_sid, room, identity, app_id, account_id, mode, kind, publisher,
                                   declared_quality, org_id, joined_at, last_seen_at)
        values (${session.participantSid}, ${session.room}, ${session.identity}, ${session.appId}, ${session.accountId},
                ${session.mode}, ${session.kind}, ${session.publisher}, ${session.declaredQuality}, ${session.orgId},
                ${sql.timestamp(session.joinedAt)}, ${sql.timestamp(session.joinedAt)})
        on conflict do nothing`),

    /** The highest quality a participant published; `at` (its first report) is kept. */
    recordPublishedQuality: (participantSid: string, quality: Quality, at: Date) =>
      db.query(sql.unsafe`
        insert into live_published_quality (participant_sid, quality, reported_at)
        values (${participantSid}, ${quality}, ${sql.timestamp(at)})
        on conflict (participant_sid) do update set quality = case
          when array_position(array['hd', 'fhd', '4k'], excluded.quality)
               > array_position(array['hd', 'fhd', '4k'], live_published_quality.quality)
          then excluded.quality else live_published_quality.quality end`),

    /**
     * Locks open sessions, in participant order (the one order of every transaction that locks
     * several): a participant's; a room's, or those that joined it at or after `since` (one
     * incarnation of it: a room re-created after its node died has the same name); or a room
     * identity's that joined before `before` (the participants a later join of it replaced: LiveKit
     * allows one per identity).
     */
    lockOpen: (
      filter:
        | { participantSid: string }
        | { room: string; since?: Date }
        | { room: string; identity: string; before: Date },
    ) =>
      db.any(sql.type(OpenSessionRow)`
        select ${openColumns} from live_sessions s left join live_published_quality q using (participant_sid)
        where s.left_at is null and ${
          'participantSid' in filter
            ? sql.fragment`s.participant_sid = ${filter.participantSid}`
            : 'identity' in filter
              ? sql.fragment`s.room = ${filter.room} and s.identity = ${filter.identity}
                  and s.joined_at < ${sql.timestamp(filter.before)}`
              : sql.fragment`s.room = ${filter.room}
                  and s.joined_at >= ${sql.timestamp(filter.since ?? new Date(0))}`
        }
        order by s.participant_sid
        for update of s`),

    /** Every open session of a live key, for the spend guard (not locked: it only reads). */
    openLiveSessions: () =>
      db.any(sql.type(OpenSessionRow)`
        select ${openColumns} from live_sessions s left join live_published_quality q using (participant_sid)
        where s.left_at is null and s.mode = 'live'`),

    /** The open sessions of an org's calls (of one identity, when given). */
    openOfOrg: (orgId: string, identity?: string) =>
      db.any(sql.type(z.object({ room: z.string(), identity: z.string() }))`
        select room, identity from live_sessions
        where org_id = ${orgId} and left_at is null
          ${identity === undefined ? sql.fragment`` : sql.fragment`and identity = ${identity}`}`),

    openRooms: () =>
      db.anyFirst(
        sql.type(
          z.object({ room: z.string() }),
        )`select distinct room from live_sessions where left_at is null`,
      ),

    /** Ends sessions in one statement: a room of 100,000 was as many statements in one transaction. */
    close: (ended: readonly { participantSid: string; leftAt: Date; billedSeconds: number }[]) =>
      db.query(sql.unsafe`
        update live_sessions s set left_at = e.left_at, billed_seconds = e.billed_seconds
        from unnest(${sql.array(
          ended.map((session) => session.participantSid),
          'text',
        )}::text[], ${sql.array(
          ended.map((session) => session.leftAt.toISOString()),
          'timestamptz',
        )}::timestamptz[], ${sql.array(
          ended.map((session) => session.billedSeconds),
          'int4',
        )}::int[]) as e(participant_sid, left_at, billed_seconds)
        where s.participant_sid = e.participant_sid`),

    markSeen: (participantSids: readonly string[], at: Date) =>
      db.query(sql.unsafe`
        update live_sessions set last_seen_at = greatest(last_seen_at, ${sql.timestamp(at)}), missing_since = null
        where participant_sid = any(${sql.array(participantSids, 'text')}) and left_at is null`),

    /** Notes when open sessions were first found missing from their LiveKit room. */
    markMissing: (participantSids: readonly string[], at: Date) =>
      db.query(sql.unsafe`
        update live_sessions set missing_since = ${sql.timestamp(at)}
        where participant_sid = any(${sql.array(participantSids, 'text')}) and left_at is null
          and missing_since is null`),
  };
}
