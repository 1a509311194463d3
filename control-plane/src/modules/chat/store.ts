import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Db } from '../../platform/transaction.js';

/** SQL of chat users, monthly active users and rooms. */
export function chatStore(db: Db) {
  return {
    /** Users given a credential, in one statement (ejabberd asks whether they exist). */
    addUsers: (users: { appId: string; mode: KeyMode; userId: string; at: Date }[]) =>
      db.query(sql.unsafe`
        insert into chat_users (app_id, mode, user_id, created_at)
        select * from ${sql.unnest(
          users.map((user) => [user.appId, user.mode, user.userId, user.at.toISOString()]),
          ['text', 'text', 'text', 'timestamptz'],
        )}
        on conflict do nothing`),

    userExists: (appId: string, mode: KeyMode, userId: string) =>
      db.exists(sql.type(z.object({ exists: z.boolean() }))`
        select 1 from chat_users where app_id = ${appId} and mode = ${mode} and user_id = ${userId}`),

    /** Up to `limit` users counted in months before `before` (the first of a month); answers how many. */
    pruneMonthlyActiveUsers: async (before: string, limit: number) =>
      (
        await db.query(sql.unsafe`
          delete from chat_monthly_active_users where (app_id, mode, month, user_id) in (
            select app_id, mode, month, user_id from chat_monthly_active_users
            where month < ${before}::date limit ${limit})`)
      ).rowCount,

    /** Each user's first login of a month; returns the users that were not counted yet, with the UTC day. */
    addMonthlyActiveUsers: (
      users: { appId: string; mode: KeyMode; month: string; userId: string; at: Date }[],
    ) =>
      db.any(
        sql.type(
          z.object({
            app_id: z.string(),
            mode: z.enum(['live', 'test']),
            user_id: z.string(),
            day: z.string(),
          }),
        )`
          insert into chat_monthly_active_users (app_id, mode, month, user_id, first_login_at)
          select app_id, mode, (month || '-01')::date, user_id, at from ${sql.unnest(
            users.map((user) => [user.appId, user.mode, user.month, user.userId, user.at.toISOString()]),
            ['text', 'text', 'text', 'text', 'timestamptz'],
          )} as u (app_id, mode, month, user_id, at)
          on conflict do nothing
          returning app_id, mode, user_id, to_char(first_login_at at time zone 'UTC', 'YYYY-MM-DD') as day`,
      ),

    addRoom: (appId: string, mode: KeyMode, room: string, at: Date) =>
      db.query(sql.unsafe`
        insert into chat_rooms (app_id, mode, room, created_at)
        values (${appId}, ${mode}, ${room}, ${sql.timestamp(at)}) on conflict do nothing`),

    roomNames: (appId: string, mode: KeyMode) =>
      db.anyFirst(
        sql.type(z.object({ room: z.string() }))`
          select room from chat_rooms where app_id = ${appId} and mode = ${mode} order by room`,
      ),
  };
}
