import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Db } from '../../platform/transaction.js';
import { type MediaDraft, MediaRow } from './schema.js';

const columns = sql.fragment`
  id, app_id, account_id, mode, kind, storage_key, content_type, size_bytes, width, height, thumbnail_key,
  thumbnail_bytes`;

const Key = z.object({ thumbnail_key: z.string() });

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

    /** The thumbnails of those of these media that are still shown. */
    shownThumbnails: (ids: readonly string[]) =>
      db.anyFirst(sql.type(Key)`
        select thumbnail_key from media where id = any(${sql.array(ids, 'text')}) and deleted_at is null`),

    /**
     * Deletes media (by id, or by the objects they were made from): they no longer hold their
     * objects; answers the thumbnails they had.
     */
    release: async (at: Date, by: { ids: readonly string[] } | { objectIds: readonly string[] }) =>
      db.anyFirst(sql.type(Key)`
        update media set deleted_at = ${sql.timestamp(at)}, object_id = null
        where deleted_at is null and ${
          'ids' in by
            ? sql.fragment`id = any(${sql.array(by.ids, 'text')})`
            : sql.fragment`object_id = any(${sql.array(by.objectIds, 'text')})`
        }
        returning thumbnail_key`),
  };
}
