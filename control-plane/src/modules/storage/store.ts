import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import { StorageObjectRow } from './schema.js';

const columns = sql.fragment`
  id, app_id, mode, name, content_type, declared_size, size_bytes, metadata, status, storage_key, owner_user_id,
  created_at, completed_at`;

/** SQL of storage objects. */
export function storageStore(db: Db) {
  return {
    /** Serialises the quota check and the reservation of one app's uploads in a mode. */
    lockQuota: (appId: string, mode: KeyMode) =>
      db.query(sql.unsafe`select pg_advisory_xact_lock(hashtext(${`storage:${appId}:${mode}`}))`),

    usedBytes: (appId: string, mode: KeyMode) =>
      db.oneFirst(
        sql.type(z.object({ used: z.number().int() }))`
          select coalesce(sum(coalesce(size_bytes, declared_size)), 0)::bigint as used
          from storage_objects where app_id = ${appId} and mode = ${mode}`,
      ),

    insert: (row: {
      id: string;
      appId: string;
      accountId: string;
      mode: KeyMode;
      name: string;
      contentType: string;
      declaredSize: number;
      metadata: Record<string, string>;
      storageKey: string;
      ownerUserId: string | null;
      at: Date;
    }) =>
      db.one(sql.type(StorageObjectRow)`
        insert into storage_objects (id, app_id, account_id, mode, name, content_type, declared_size, metadata, status,
                                     storage_key, owner_user_id, created_at)
        values (${row.id}, ${row.appId}, ${row.accountId}, ${row.mode}, ${row.name}, ${row.contentType},
                ${row.declaredSize}, ${sql.jsonb(row.metadata)}, 'pending', ${row.storageKey}, ${row.ownerUserId},
                ${sql.timestamp(row.at)})
        returning ${columns}`),

    /**
     * An object as its own app sees it in one mode (any other app or mode finds nothing); as a user
     * sees it, only if they uploaded it.
     */
    find: (id: string, appId: string, mode: KeyMode, ownerUserId?: string) =>
      db.maybeOne(sql.type(StorageObjectRow)`
        select ${columns} from storage_objects where id = ${id} and app_id = ${appId} and mode = ${mode}
          ${ownerUserId === undefined ? sql.fragment`` : sql.fragment`and owner_user_id = ${ownerUserId}`}`),

    markReady: (id: string, sizeBytes: number, at: Date) =>
      db.one(sql.type(StorageObjectRow)`
        update storage_objects set status = 'ready', size_bytes = ${sizeBytes}, completed_at = ${sql.timestamp(at)}
        where id = ${id} returning ${columns}`),

    delete: (id: string) => db.query(sql.unsafe`delete from storage_objects where id = ${id}`),

    deleteMany: (ids: readonly string[]) =>
      db.query(sql.unsafe`delete from storage_objects where id = any(${sql.array(ids, 'text')})`),

    existsByKey: (storageKey: string) =>
      db.exists(sql.unsafe`select 1 from storage_objects where storage_key = ${storageKey}`),

    idByKey: (storageKey: string) =>
      db.maybeOneFirst(
        sql.type(
          z.object({ id: z.string() }),
        )`select id from storage_objects where storage_key = ${storageKey}`,
      ),

    /** A page, newest first, after the (created_at, id) of the previous page's last object. */
    page: (filter: {
      appId: string;
      mode: KeyMode;
      limit: number;
      status?: 'pending' | 'ready';
      after?: Position;
    }) =>
      db.any(sql.type(StorageObjectRow)`
        select ${columns} from storage_objects
        where app_id = ${filter.appId} and mode = ${filter.mode}
          ${filter.status ? sql.fragment`and status = ${filter.status}` : sql.fragment``}
          ${
            filter.after
              ? sql.fragment`and (created_at, id) < (${sql.timestamp(filter.after.createdAt)}, ${filter.after.id})`
              : sql.fragment``
          }
        order by created_at desc, id desc
        limit ${filter.limit}`),

    /** Pending uploads made before `pendingBefore`, and test objects made before `testBefore`. */
    expired: (pendingBefore: Date, testBefore: Date, limit: number) =>
      db.any(sql.type(StorageObjectRow)`
        select ${columns} from storage_objects
        where (status = 'pending' and created_at < ${sql.timestamp(pendingBefore)})
           or (mode = 'test' and created_at < ${sql.timestamp(testBefore)})
        order by created_at limit ${limit}`),

    /**
     * Ready bytes per app and mode that have not been metered for `day` yet. The apps and modes that
     * hold objects come from a skip along the listing index (one descent each), and only those not
     * metered yet are summed, through the same index: summing every object and then dropping the
     * metered ones read the whole table at every run, all day.
     */
    unmeteredStoredBytes: (day: string) =>
      db.any(
        sql.type(
          z.object({
            app_id: z.string(),
            account_id: z.string(),
            mode: z.enum(['live', 'test']),
            bytes: z.number().int(),
          }),
        )`
          with recursive scopes as (
            (select app_id, mode from storage_objects order by app_id, mode limit 1)
            union all
            select next.app_id, next.mode from scopes s cross join lateral (
              select o.app_id, o.mode from storage_objects o
              where (o.app_id, o.mode) > (s.app_id, s.mode)
              order by o.app_id, o.mode limit 1) next
          )
          select s.app_id, stored.account_id, s.mode, stored.bytes
          from scopes s cross join lateral (
            select o.account_id, sum(o.size_bytes)::bigint as bytes from storage_objects o
            where o.app_id = s.app_id and o.mode = s.mode and o.status = 'ready'
            group by o.account_id) stored
          where not exists (select 1 from storage_metered_days m
                            where m.app_id = s.app_id and m.mode = s.mode and m.day = ${day})`,
      ),

    /** Up to `limit` claims of days before `before`; answers how many went. */
    pruneMeteredDays: async (before: string, limit: number) =>
      (
        await db.query(sql.unsafe`
          delete from storage_metered_days where (app_id, mode, day) in (
            select app_id, mode, day from storage_metered_days where day < ${before}::date limit ${limit})`)
      ).rowCount,

    /** Claims a day's metering of one app and mode; false if another replica already did. */
    claimMeteredDay: async (appId: string, mode: KeyMode, day: string) =>
      (await db.maybeOneFirst(
        sql.type(z.object({ claimed: z.boolean() }))`
          insert into storage_metered_days (app_id, mode, day) values (${appId}, ${mode}, ${day})
          on conflict do nothing returning true as claimed`,
      )) === true,
  };
}
