import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Position } from '../../platform/cursors.js';
import { DeliveriesMade, type EventInStatement } from '../../platform/outbox.js';
import type { Db } from '../../platform/transaction.js';
import { BuzzRow, ProfileRow } from './schema.js';

/** An app's data in one key mode: every query is scoped to it. */
export interface Scope {
  appId: string;
  mode: KeyMode;
}

export const profileColumns = sql.fragment`
  p.pk, p.user_id, p.username, p.full_name, p.category, p.followers, p.following, p.buzzes, p.verified,
  p.created_at`;
const buzzColumns = sql.fragment`
  b.pk, b.id, b.type, b.text, b.reactions, b.comments, b.created_at, b.author_pk,
  a.user_id as author_id, a.username as author_username`;
export const inScope = (alias: string, scope: Scope) =>
  sql.fragment`${sql.identifier([alias, 'app_id'])} = ${scope.appId} and ${sql.identifier([alias, 'mode'])} = ${scope.mode}`;
/** The pk of the profile a username names in the scope (null when none), for an author's lists. */
export const profileNamed = (scope: Scope, username: string) => sql.fragment`(
  select p.pk from profiles p where ${inScope('p', scope)} and lower(p.username) = lower(${username}))`;
/** Newest first, after a cursor's position: the keyset the listing indexes are ordered by. */
export const after = (alias: string, position: Position | undefined) =>
  position
    ? sql.fragment`and (${sql.identifier([alias, 'created_at'])}, ${sql.identifier([alias, 'id'])}) < (${sql.timestamp(position.createdAt)}, ${position.id})`
    : sql.fragment``;

const Pk = z.object({ pk: z.number() });
const Author = z.object({ pk: z.number(), user_id: z.string(), username: z.string() });
// Made once: zod builds a new object type at each merge or extend (about 20 µs of a publish).
const PublishedBy = Author.merge(DeliveriesMade);
const Reacted = DeliveriesMade.extend({ reactions: z.number() });
const Count = z.object({ count: z.number() });
const VocabularyPruned = z.object({ looked: z.number(), pruned: z.number() });

/** SQL of profiles, buzzes, reactions, comments and follows. Takes any connection or transaction. */
export function socialStore(db: Db) {
  /**
   * Locks two profiles (of one app and mode) for their counters in the one order of profiles: by user
   * id in "C" collation, as a turn of publishes takes their authors' (platform/caller.ts callerOrder).
   */
  const lockInOrder = (a: number, b: number) =>
    db.query(sql.unsafe`
      select pk from profiles where pk in (${a}, ${b}) order by user_id collate "C" for no key update`);
  return {
    profileOfUser: (scope: Scope, userId: string) =>
      db.maybeOne(sql.type(ProfileRow)`
        select ${profileColumns} from profiles p where ${inScope('p', scope)} and p.user_id = ${userId}`),

    profileByUsername: (scope: Scope, username: string) =>
      db.maybeOne(sql.type(ProfileRow)`
        select ${profileColumns} from profiles p
        where ${inScope('p', scope)} and lower(p.username) = lower(${username})`),

    /** Creates or replaces the user's profile (a unique violation when the username is another's). */
    upsertProfile: (
      scope: Scope,
      profile: { userId: string; username: string; fullName: string; category: string; at: Date },
    ) =>
      db.one(sql.type(ProfileRow)`
        insert into profiles as p (app_id, mode, user_id, username, full_name, category, created_at, updated_at)
        values (${scope.appId}, ${scope.mode}, ${profile.userId}, ${profile.username}, ${profile.fullName},
                ${profile.category}, ${sql.timestamp(profile.at)}, ${sql.timestamp(profile.at)})
        on conflict (app_id, mode, user_id) do update
        set username = excluded.username, full_name = excluded.full_name, category = excluded.category,
            updated_at = excluded.updated_at,
            -- The app's server verified this name: another name needs verifying again.
            verified = p.verified and lower(p.username) = lower(excluded.username)
        returning ${profileColumns}`),

    setVerified: (scope: Scope, username: string, verified: boolean) =>
      db.maybeOne(sql.type(ProfileRow)`
        update profiles p set verified = ${verified}
        where ${inScope('p', scope)} and lower(p.username) = lower(${username})
        returning ${profileColumns}`),

    /**
     * Publishes a buzz as the user's profile, counted on it, with its event (whose `username` hole is
     * the author's), in one statement; answers the author and the event's deliveries, or null when the
     * user has no profile (nothing written).
     */
    publishBuzz: (
      scope: Scope,
      buzz: { id: string; userId: string; type: string; text: string; at: Date },
      created: EventInStatement,
    ) => {
      const event = created.over('author', { username: sql.fragment`author.username` });
      return db.maybeOne(sql.type(PublishedBy)`
        with author as (
          update profiles p set buzzes = p.buzzes + 1
          where ${inScope('p', scope)} and p.user_id = ${buzz.userId}
          returning p.pk, p.user_id, p.username
        ), buzz as (
          insert into buzzes (id, app_id, mode, author_pk, type, text, created_at)
          select ${buzz.id}, ${scope.appId}, ${scope.mode}, author.pk, ${buzz.type}, ${buzz.text},
                 ${sql.timestamp(buzz.at)}
          from author
        ), ${event.ctes}
        select pk, user_id, username, ${event.deliveries} as deliveries from author`);
    },

    buzz: (scope: Scope, id: string) =>
      db.maybeOne(sql.type(BuzzRow)`
        select ${buzzColumns} from buzzes b join profiles a on a.pk = b.author_pk
        where b.id = ${id} and ${inScope('b', scope)} and b.deleted_at is null`),

    /** A page, newest first, of the app's buzzes or of one author's (by username: one round trip). */
    listBuzzes: (scope: Scope, options: { author?: string; after?: Position; limit: number }) =>
      db.any(sql.type(BuzzRow)`
        select ${buzzColumns} from buzzes b join profiles a on a.pk = b.author_pk
        where ${
          options.author === undefined
            ? inScope('b', scope)
            : sql.fragment`b.author_pk = ${profileNamed(scope, options.author)}`
        }
          and b.deleted_at is null ${after('b', options.after)}
        order by b.created_at desc, b.id desc
        limit ${options.limit}`),

    /** Soft-deletes a buzz (of one author when given) and takes it off its author's count. */
    deleteBuzz: async (scope: Scope, id: string, at: Date, authorPk?: number) =>
      (
        await db.maybeOne(sql.type(Pk)`
          with gone as (
            update buzzes b set deleted_at = ${sql.timestamp(at)}
            where b.id = ${id} and ${inScope('b', scope)} and b.deleted_at is null
              ${authorPk === undefined ? sql.fragment`` : sql.fragment`and b.author_pk = ${authorPk}`}
            returning b.pk, b.author_pk
          )
          update profiles p set buzzes = p.buzzes - 1 from gone where p.pk = gone.author_pk
          returning gone.pk`)
      )?.pk ?? null,

    /**
     * Sets the profile's reaction to a buzz and counts it when new, with `reacted` (the event of a new
     * reaction, its count filled in here) in the same statement. Answers the buzz's reactions.
     */
    react: (buzzPk: number, profilePk: number, kind: string, at: Date, reacted: EventInStatement) => {
      const event = reacted.over('added', { reactions: sql.fragment`added.reactions` });
      return db.one(sql.type(Reacted)`
        with reaction as (
          insert into buzz_reactions (buzz_pk, profile_pk, kind, created_at)
          values (${buzzPk}, ${profilePk}, ${kind}, ${sql.timestamp(at)})
          on conflict (buzz_pk, profile_pk) do update set kind = excluded.kind
          -- xmax is 0 on a row this statement inserted, not on one it updated.
          returning xmax = 0 as inserted
        ), counted as (
          update buzzes b set reactions = b.reactions + case when reaction.inserted then 1 else 0 end
          from reaction where b.pk = ${buzzPk}
          returning b.reactions, reaction.inserted
        ), added as (
          select reactions from counted where inserted
        ), ${event.ctes}
        select reactions, ${event.deliveries} as deliveries from counted`);
    },

    /** Removes the profile's reaction; answers whether there was one. */
    unreact: async (buzzPk: number, profilePk: number) =>
      (await db.maybeOne(sql.type(Pk)`
          with gone as (
            delete from buzz_reactions where buzz_pk = ${buzzPk} and profile_pk = ${profilePk} returning buzz_pk
          )
          update buzzes b set reactions = b.reactions - 1 from gone where b.pk = gone.buzz_pk
          returning b.pk`)) !== null,

    /**
     * Follows a profile; answers whether the follow is new and the followee's followers after it. The
     * two profiles are locked in key order first: an UPDATE alone locks rows in whatever order its plan
     * reads them (a bitmap scan goes by where the rows lie), and crowds following each other deadlocked.
     */
    follow: async (followerPk: number, followeePk: number, at: Date) => {
      const added = await db.maybeOne(sql.type(Pk)`
        insert into follows (follower_pk, followee_pk, created_at)
        values (${followerPk}, ${followeePk}, ${sql.timestamp(at)})
        on conflict do nothing returning followee_pk as pk`);
      const step = added ? 1 : 0;
      await lockInOrder(followerPk, followeePk);
      return {
        isNew: added !== null,
        followers: await db.oneFirst(sql.type(Count)`
          with counted as (
            update profiles set
              followers = followers + case when pk = ${followeePk} then ${step} else 0 end,
              following = following + case when pk = ${followerPk} then ${step} else 0 end
            where pk in (${followerPk}, ${followeePk})
            returning pk, followers
          )
          select followers as count from counted where pk = ${followeePk}`),
      };
    },

    unfollow: async (followerPk: number, followeePk: number) => {
      await lockInOrder(followerPk, followeePk);
      return (
        (await db.oneFirst(sql.type(Count)`
        with gone as (
          delete from follows where follower_pk = ${followerPk} and followee_pk = ${followeePk}
          returning follower_pk
        ), counted as (
          update profiles set
            followers = followers - case when pk = ${followeePk} then 1 else 0 end,
            following = following - case when pk = ${followerPk} then 1 else 0 end
          from gone where pk in (${followerPk}, ${followeePk})
          returning pk
        )
        select count(*)::int as count from gone`)) > 0
      );
    },

    /**
     * Deletes the first `limit` terms that renames let go (0038) from the vocabulary when no name holds
     * them, and forgets them: answers how many it looked at and deleted. Run in its own transaction: it
     * locks the names' word tables against writes until the commit, so that no name takes a term as it
     * goes, waiting at most `lockTimeoutMs` for the writes under way (a lock_not_available error then).
     */
    pruneVocabulary: async (limit: number, lockTimeoutMs: number) => {
      await db.query(sql.unsafe`select set_config('lock_timeout', ${`${lockTimeoutMs}ms`}, true)`);
      await db.query(sql.unsafe`lock table profile_words, profile_word_pairs in share mode`);
      return db.one(sql.type(VocabularyPruned)`
        with taken as (
          -- By their row ids, found once: joined to its own first rows, the table was read again for
          -- each of its rows (a plan made without statistics), 8 s for 11,000.
          delete from profile_vocabulary_dropped
          where ctid = any(array(
            select ctid from profile_vocabulary_dropped order by app_id, mode, term limit ${limit}))
          returning app_id, mode, term
        ), pruned as (
          delete from profile_vocabulary v using taken t
          where (v.app_id, v.mode, v.term) = (t.app_id, t.mode, t.term)
            and not exists (
              select from profile_words w where (w.app_id, w.mode, w.word) = (v.app_id, v.mode, v.term)
            )
            and not exists (
              select from profile_word_pairs w where (w.app_id, w.mode, w.pair) = (v.app_id, v.mode, v.term)
            )
          returning 1
        )
        select (select count(*) from taken)::int as looked, (select count(*) from pruned)::int as pruned`);
    },
  };
}
