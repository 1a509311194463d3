import { sql } from 'slonik';
import type { KeyMode } from '../../platform/caller.js';
import type { Db } from '../../platform/transaction.js';
import { type Product, RealtimeAppRow } from './schema.js';

const columns = sql.fragment`
  r.app_id, a.account_id, r.mode, r.chat_prefix, k.publishable_token, r.shield_secret, r.mam, r.products,
  r.max_room_size, r.version`;
const from = sql.fragment`
  realtime_apps r join apps a on a.id = r.app_id join api_keys k on k.id = r.publishable_key_id`;

/** SQL of an app's realtime settings. */
export function realtimeStore(db: Db) {
  return {
    find: (appId: string, mode: KeyMode) =>
      db.maybeOne(sql.type(RealtimeAppRow)`
        select ${columns} from ${from} where r.app_id = ${appId} and r.mode = ${mode}`),

    findByPrefix: (prefix: string) =>
      db.maybeOne(sql.type(RealtimeAppRow)`select ${columns} from ${from} where r.chat_prefix = ${prefix}`),

    /** Serialises concurrent first setups of one app, without locking the app's row. */
    lockSetup: (appId: string) =>
      db.query(sql.unsafe`select pg_advisory_xact_lock(hashtext(${`realtime-setup:${appId}`}))`),

    insert: (row: {
      appId: string;
      mode: KeyMode;
      chatPrefix: string;
      publishableKeyId: string;
      shieldSecret: string;
      mam: boolean;
      products: Product[];
      maxRoomSize: number;
      at: Date;
    }) =>
      db.query(sql.unsafe`
        insert into realtime_apps (app_id, mode, chat_prefix, publishable_key_id, shield_secret, mam, products,
                                   max_room_size, created_at, updated_at)
        values (${row.appId}, ${row.mode}, ${row.chatPrefix}, ${row.publishableKeyId}, ${row.shieldSecret}, ${row.mam},
                ${sql.array(row.products, 'text')}, ${row.maxRoomSize}, ${sql.timestamp(row.at)}, ${sql.timestamp(row.at)})`),

    /** Writes new settings if nobody changed them since `version` was read; false otherwise. */
    update: async (
      appId: string,
      mode: KeyMode,
      version: number,
      change: { mam: boolean; products: Product[]; maxRoomSize: number; at: Date },
    ) =>
      (
        await db.query(sql.unsafe`
          update realtime_apps
          set mam = ${change.mam}, products = ${sql.array(change.products, 'text')},
              max_room_size = ${change.maxRoomSize}, updated_at = ${sql.timestamp(change.at)}, version = version + 1
          where app_id = ${appId} and mode = ${mode} and version = ${version}`)
      ).rowCount === 1,
  };
}
