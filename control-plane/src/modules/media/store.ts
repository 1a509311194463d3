import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Db } from '../../platform/transaction.js';
import { type MediaDraft, MediaRow } from './schema.js';

const columns = sql.fragment`
  id, app_id, account_id, mode, kind, storage_key, content_type, size_bytes, width, height, thumbnail_key,
  thumbnail_bytes`;

const Key = z.object({ thumbnail_key: z.string() });
const Released = z.object({ id: z.string(), thumbnail_key: z.string() });
const keys = (thumbnailKeys: readonly string[]) => sql.array(thumbnailKeys, 'text');

/** SQL of public media. */
export function mediaStore(db: Db) {
  return {
    insert: (media: MediaDraft & { appId: string; accountId: string; mode: KeyMode; at: Date }) =>
      db.query(sql.unsafe`
        insert into media (id, app_id, account_id, mode, kind, object_id, storage_key, content_type, size_bytes,
                           width, height, duration_ms, thumbnail_key, thumbnail_bytes, created_at)
        values (${media.id}, ${media.appId}, ${media.accountId}, ${media.mode}, ${media.kind}, ${media.objectId},
                ${media.storageKey}, ${media.contentType}, ${media.sizeBytes}, ${media.width}, ${media.height},
                ${media.durationMs}, ${media.thumbnailKey}, ${media.thumbnailBytes}, ${sql.timestamp(media.at)})`),

    /** Media still shown: a deleted one is not found, whatever its bytes. */
    live: (id: string) =>
      db.maybeOne(sql.type(MediaRow)`select ${columns} from media where id = ${id} and deleted_at is null`),

    /**
     * Deletes media (by id, or by the objects they were made from): they no longer hold their
     * objects; answers each one's id and the thumbnail it had.
     */
    release: async (at: Date, by: { ids: readonly string[] } | { objectIds: readonly string[] }) =>
      db.any(sql.type(Released)`
        update media set deleted_at = ${sql.timestamp(at)}, object_id = null
        where deleted_at is null and ${
          'ids' in by
            ? sql.fragment`id = any(${sql.array(by.ids, 'text')})`
            : sql.fragment`object_id = any(${sql.array(by.objectIds, 'text')})`
        }
        returning id, thumbnail_key`),

    /** Schedules thumbnails for removal from the object store once due (the earlier time if already due). */
    scheduleRemoval: (thumbnailKeys: readonly string[], due: Date) =>
      db.query(sql.unsafe`
        insert into media_thumbnail_removals (thumbnail_key, due_at)
        select key, ${sql.timestamp(due)} from unnest(${keys(thumbnailKeys)}) key
        on conflict (thumbnail_key) do update set due_at = least(media_thumbnail_removals.due_at, excluded.due_at)`),

    /** Takes removed thumbnails off the schedule. */
    unschedule: (thumbnailKeys: readonly string[]) =>
      db.query(sql.unsafe`
        delete from media_thumbnail_removals where thumbnail_key = any(${keys(thumbnailKeys)})`),

    /**
     * Takes a prepared thumbnail off the schedule for the media recorded with it. False when its
     * removal was due already: the sweep may have removed it (even in a sweep whose commit failed).
     */
    keep: async (thumbnailKey: string, now: Date) =>
      (await db.maybeOneFirst(sql.type(z.object({ pending: z.boolean() }))`
        delete from media_thumbnail_removals where thumbnail_key = ${thumbnailKey}
        returning due_at > ${sql.timestamp(now)} as pending`)) === true,

    /** Puts removals off, after a sweep failed to remove them. */
    postpone: (thumbnailKeys: readonly string[], due: Date) =>
      db.query(sql.unsafe`
        update media_thumbnail_removals set due_at = ${sql.timestamp(due)}
        where thumbnail_key = any(${keys(thumbnailKeys)})`),

    /**
     * Up to `limit` removals due, of thumbnails under `under`, locked to the transaction: a sweep
     * beside it skips them, and a write keeping one of them waits for its end.
     */
    dueRemovals: (now: Date, under: string, limit: number) =>
      db.anyFirst(sql.type(Key)`
        select thumbnail_key from media_thumbnail_removals
        where due_at <= ${sql.timestamp(now)} and starts_with(thumbnail_key, ${under})
        order by due_at
        limit ${limit}
        for update skip locked`),
  };
}
