import { type CommonQueryMethods, sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../accounts/schema.js';

/** SQL of chat users and rooms. */
export function chatStore(db: CommonQueryMethods) {
  return {
    addUser: (appId: string, mode: KeyMode, userId: string, at: Date) =>
      db.query(sql.unsafe`
        insert into chat_users (app_id, mode, user_id, created_at)
        values (${appId}, ${mode}, ${userId}, ${sql.timestamp(at)}) on conflict do nothing`),

    userExists: (appId: string, mode: KeyMode, userId: string) =>
      db.exists(sql.type(z.object({ exists: z.boolean() }))`
        select 1 from chat_users where app_id = ${appId} and mode = ${mode} and user_id = ${userId}`),

    addRoom: (appId: string, mode: KeyMode, room: string, at: Date) =>
      db.query(sql.unsafe`
        insert into chat_rooms (app_id, mode, room, created_at)
        values (${appId}, ${mode}, ${room}, ${sql.timestamp(at)}) on conflict do nothing`),
  };
}
