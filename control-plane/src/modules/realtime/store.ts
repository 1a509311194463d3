import { type CommonQueryMethods, sql } from 'slonik';
import type { KeyMode } from '../accounts/schema.js';
import { type Product, RealtimeAppRow } from './schema.js';

const columns = sql.fragment`
  r.app_id, r.mode, r.chat_prefix, k.publishable_token, r.shield_secret, r.mam, r.products, r.max_room_size`;

/** SQL of an app's realtime settings. */
export function realtimeStore(db: CommonQueryMethods) {
  return {
    find: (appId: string, mode: KeyMode) =>
      db.maybeOne(sql.type(RealtimeAppRow)`
        select ${columns} from realtime_apps r join api_keys k on k.id = r.publishable_key_id
        where r.app_id = ${appId} and r.mode = ${mode}`),

    findByPrefix: (prefix: string) =>
      db.maybeOne(sql.type(RealtimeAppRow)`
        select ${columns} from realtime_apps r join api_keys k on k.id = r.publishable_key_id
        where r.chat_prefix = ${prefix}`),

    /** Serialises concurrent first setups of one app. */
    lockApp: (appId: string) => db.query(sql.unsafe`select id from apps where id = ${appId} for update`),

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

    update: (
      appId: string,
      mode: KeyMode,
      change: { mam: boolean; products: Product[]; maxRoomSize: number; at: Date },
    ) =>
      db.query(sql.unsafe`
        update realtime_apps
        set mam = ${change.mam}, products = ${sql.array(change.products, 'text')}, max_room_size = ${change.maxRoomSize},
            updated_at = ${sql.timestamp(change.at)}
        where app_id = ${appId} and mode = ${mode}`),
  };
}
