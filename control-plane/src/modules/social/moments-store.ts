import { type FragmentSqlToken, sql } from 'slonik';
import { z } from 'zod';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import { MomentRow } from './schema.js';
import { after, profileNamed, type Scope } from './store.js';

/**
 * The author's fields come from subqueries rather than a third joined table: PostgreSQL plans a page
 * of the app's moments anew on each call (its plan depends on how many moments the app has), and one
 * join fewer to weigh made that page cost it a third less.
 */
const momentColumns = sql.fragment`
  mo.pk, mo.id, mo.caption, mo.like_count, mo.comment_count, mo.view_count, mo.created_at, mo.media_id,
  m.width, m.height, m.duration_ms,
  (select a.user_id from profiles a where a.pk = mo.author_pk) as author_id,
  (select a.username from profiles a where a.pk = mo.author_pk) as author_username`;
/** A moment shows while it and its media do (storage's expiry of a test object takes the media down). */
const shown = sql.fragment`
  from moments mo join media m on m.id = mo.media_id
  where mo.deleted_at is null and m.deleted_at is null`;
const inScope = (scope: Scope) => sql.fragment`mo.app_id = ${scope.appId} and mo.mode = ${scope.mode}`;

const Pk = z.object({ pk: z.number() });
const Count = z.object({ count: z.number() });
const MediaId = z.object({ media_id: z.string() });

/** SQL of moments, their likes, comments and views. */
export function momentsStore(db: Db) {
  /** Soft-deletes the moments `which` picks; answers their media. */
  const softDelete = (which: FragmentSqlToken, at: Date) =>
    db.anyFirst(sql.type(MediaId)`
      update moments mo set deleted_at = ${sql.timestamp(at)}
      where ${which}
      returning mo.media_id`);

  return {
    insert: (
      scope: Scope,
      moment: { id: string; authorPk: number; mediaId: string; caption: string; at: Date },
    ) =>
      db.query(sql.unsafe`
        insert into moments (id, app_id, mode, author_pk, media_id, caption, created_at)
        values (${moment.id}, ${scope.appId}, ${scope.mode}, ${moment.authorPk}, ${moment.mediaId},
                ${moment.caption}, ${sql.timestamp(moment.at)})`),

    moment: (scope: Scope, id: string) =>
      db.maybeOne(
        sql.type(MomentRow)`select ${momentColumns} ${shown} and mo.id = ${id} and ${inScope(scope)}`,
      ),

    /** A page, newest first, of the app's moments or of one author's (by username: one round trip). */
    list: (scope: Scope, options: { author?: string; after?: Position; limit: number }) =>
      db.any(sql.type(MomentRow)`
        select ${momentColumns} ${shown}
          and ${
            options.author === undefined
              ? inScope(scope)
              : sql.fragment`mo.author_pk = ${profileNamed(scope, options.author)}`
          }
          ${after('mo', options.after)}
        order by mo.created_at desc, mo.id desc
        limit ${options.limit}`),

    /** Soft-deletes a moment (of one author when given); answers its media, or null when none was. */
    delete: async (scope: Scope, id: string, at: Date, authorPk?: number) => {
      const [mediaId] = await softDelete(
        sql.fragment`mo.id = ${id} and ${inScope(scope)} and mo.deleted_at is null
          -- One storage took down with its object is gone already, as reads say.
          and exists (select 1 from media m where m.id = mo.media_id and m.deleted_at is null)
          ${authorPk === undefined ? sql.fragment`` : sql.fragment`and mo.author_pk = ${authorPk}`}`,
        at,
      );
      return mediaId ?? null;
    },

    /** Soft-deletes the moments showing media that storage took down with their objects. */
    deleteShowing: async (mediaIds: readonly string[], at: Date) => {
      await softDelete(
        sql.fragment`mo.deleted_at is null and mo.media_id = any(${sql.array(mediaIds, 'text')})`,
        at,
      );
    },

    /** Likes a moment once per profile; answers whether the like is new and the moment's likes. */
    like: async (momentPk: number, profilePk: number, at: Date) => {
      const added = await db.maybeOne(sql.type(Pk)`
        insert into moment_likes (moment_pk, profile_pk, created_at)
        values (${momentPk}, ${profilePk}, ${sql.timestamp(at)})
        on conflict do nothing returning moment_pk as pk`);
      const likes = await db.oneFirst(sql.type(Count)`
        update moments set like_count = like_count + ${added ? 1 : 0} where pk = ${momentPk}
        returning like_count as count`);
      return { isNew: added !== null, likes };
    },

    /** Takes a profile's like back; answers the moment's likes, or null when there was none. */
    unlike: (momentPk: number, profilePk: number) =>
      db.maybeOneFirst(sql.type(Count)`
        with gone as (
          delete from moment_likes where moment_pk = ${momentPk} and profile_pk = ${profilePk} returning moment_pk
        )
        update moments mo set like_count = mo.like_count - 1 from gone where mo.pk = gone.moment_pk
        returning mo.like_count as count`),

    /** Counts a viewer once per day; answers the moment's views and whether this one counted. */
    view: async (momentPk: number, viewer: string, day: string) => {
      const counted = await db.maybeOneFirst(sql.type(Count)`
        with seen as (
          insert into moment_views (moment_pk, day, viewer) values (${momentPk}, ${day}, ${viewer})
          on conflict do nothing returning moment_pk
        )
        update moments mo set view_count = mo.view_count + 1 from seen where mo.pk = seen.moment_pk
        returning mo.view_count as count`);
      if (counted !== null) return { counted: true, views: counted };
      const views = await db.oneFirst(
        sql.type(Count)`select view_count as count from moments where pk = ${momentPk}`,
      );
      return { counted: false, views };
    },

    /** Views of days before `day`: only the current day's dedupe views. */
    pruneViews: (day: string, limit: number) =>
      db.oneFirst(sql.type(Count)`
        with gone as (
          delete from moment_views where ctid in (select ctid from moment_views where day < ${day} limit ${limit})
          returning 1
        )
        select count(*)::int as count from gone`),
  };
}
