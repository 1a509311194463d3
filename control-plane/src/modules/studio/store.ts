import { type FragmentSqlToken, sql } from 'slonik';
import { z } from 'zod';
import type { Principal } from '../../platform/caller.js';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import { type StudioKind, StudioRow } from './schema.js';

/** An app's data in one key mode: every query is scoped to it. */
export type Scope = Pick<Principal, 'appId' | 'mode'>;

/** A new asset: media made from a storage object, or an https URL with what the caller declared. */
export interface NewAsset {
  id: string;
  kind: StudioKind;
  source:
    | { mediaId: string }
    | { url: string; thumbnailUrl: string | null; width: number | null; height: number | null };
  title: string;
  tags: readonly string[];
  at: Date;
}

/** What a PATCH changes; a field left out stays. */
export interface AssetChanges {
  title?: string;
  tags?: readonly string[];
  thumbnailUrl?: string | null;
  width?: number | null;
  height?: number | null;
}

/**
 * An asset's columns, from `s` (the asset) left-joined with `m` (its media, none for a URL asset):
 * a storage object's size is its media's, read from the file.
 */
const columns = sql.fragment`
  s.id, s.kind, s.media_id, s.url, s.thumbnail_url, s.title, coalesce(m.width, s.width) as width,
  coalesce(m.height, s.height) as height, s.tags, s.created_at, s.updated_at`;
/**
 * An asset shows while it and its media do (storage's expiry of a test object takes the media down).
 * A URL asset has no media: its joined columns are null, so `m.deleted_at is null` holds.
 */
const shown = sql.fragment`
  from studio_assets s left join media m on m.id = s.media_id
  where s.deleted_at is null and m.deleted_at is null`;
/** The same rule where the asset is written, without the join. */
const writable = sql.fragment`
  s.deleted_at is null
  and not exists (select from media m where m.id = s.media_id and m.deleted_at is not null)`;
const inScope = (scope: Scope) => sql.fragment`s.app_id = ${scope.appId} and s.mode = ${scope.mode}`;

const MediaOf = z.object({ media_id: z.string().nullable() });

/** SQL of studio assets. Takes any connection or transaction. */
export function studioStore(db: Db) {
  /** Soft-deletes the assets `which` picks; answers their media (null for a URL asset). */
  const softDelete = (which: FragmentSqlToken, at: Date) =>
    db.any(sql.type(MediaOf)`
      update studio_assets s set deleted_at = ${sql.timestamp(at)}
      where ${which}
      returning s.media_id`);

  return {
    /** Inserts an asset and answers it as read (media recorded earlier in the transaction included). */
    insert: (scope: Scope, asset: NewAsset) => {
      const { source } = asset;
      const url = 'url' in source ? source : { url: null, thumbnailUrl: null, width: null, height: null };
      return db.one(sql.type(StudioRow)`
        with s as (
          insert into studio_assets (id, app_id, mode, kind, media_id, url, thumbnail_url, title, width, height, tags,
                                     created_at, updated_at)
          values (${asset.id}, ${scope.appId}, ${scope.mode}, ${asset.kind},
                  ${'mediaId' in source ? source.mediaId : null}, ${url.url}, ${url.thumbnailUrl}, ${asset.title},
                  ${url.width}, ${url.height}, ${sql.array(asset.tags, 'text')}, ${sql.timestamp(asset.at)},
                  ${sql.timestamp(asset.at)})
          returning *
        )
        select ${columns} from s left join media m on m.id = s.media_id`);
    },

    asset: (scope: Scope, id: string) =>
      db.maybeOne(sql.type(StudioRow)`select ${columns} ${shown} and s.id = ${id} and ${inScope(scope)}`),

    /** Newest first, after a cursor's position: the keyset the listing indexes are ordered by. */
    list: (scope: Scope, options: { kind?: StudioKind; after?: Position; limit: number }) =>
      db.any(sql.type(StudioRow)`
        select ${columns} ${shown} and ${inScope(scope)}
          ${options.kind === undefined ? sql.fragment`` : sql.fragment`and s.kind = ${options.kind}`}
          ${
            options.after
              ? sql.fragment`and (s.created_at, s.id) < (${sql.timestamp(options.after.createdAt)}, ${options.after.id})`
              : sql.fragment``
          }
        order by s.created_at desc, s.id desc
        limit ${options.limit}`),

    /**
     * Applies a PATCH; answers the asset, or null when no shown asset took it: none with the id, or
     * one made from a storage object when the changes touch what its file says (its size, thumbnail).
     */
    update: (scope: Scope, id: string, changes: AssetChanges, at: Date) => {
      const fileFields = [
        changes.thumbnailUrl === undefined ? null : sql.fragment`thumbnail_url = ${changes.thumbnailUrl}`,
        changes.width === undefined ? null : sql.fragment`width = ${changes.width}`,
        changes.height === undefined ? null : sql.fragment`height = ${changes.height}`,
      ].filter((set) => set !== null);
      const sets = [
        changes.title === undefined ? null : sql.fragment`title = ${changes.title}`,
        changes.tags === undefined ? null : sql.fragment`tags = ${sql.array(changes.tags, 'text')}`,
        ...fileFields,
        sql.fragment`updated_at = ${sql.timestamp(at)}`,
      ].filter((set) => set !== null);
      return db.maybeOne(sql.type(StudioRow)`
        with s as (
          update studio_assets s set ${sql.join(sets, sql.fragment`, `)}
          where s.id = ${id} and ${inScope(scope)} and ${writable}
            ${fileFields.length > 0 ? sql.fragment`and s.media_id is null` : sql.fragment``}
          returning s.*
        )
        select ${columns} from s left join media m on m.id = s.media_id`);
    },

    /** Soft-deletes an asset; answers its media (null for a URL asset), or null when none was shown. */
    delete: async (scope: Scope, id: string, at: Date) => {
      const [deleted] = await softDelete(
        sql.fragment`s.id = ${id} and ${inScope(scope)} and ${writable}`,
        at,
      );
      return deleted ?? null;
    },

    /** Soft-deletes the assets showing media that storage took down with their objects. */
    deleteShowing: async (mediaIds: readonly string[], at: Date) => {
      await softDelete(
        sql.fragment`s.deleted_at is null and s.media_id = any(${sql.array(mediaIds, 'text')})`,
        at,
      );
    },
  };
}
