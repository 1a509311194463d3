import { sql } from 'slonik';
import { z } from 'zod';
import type { Db } from '../../platform/transaction.js';
import { InviteRow, type Role, SessionRow, UserRow } from './schema.js';

const userColumns = sql.fragment`id, account_id, email, name, role, created_at`;
const sessionColumns = sql.fragment`id, user_id, user_agent, address, created_at, last_seen_at, expires_at, revoked_at`;
const inviteColumns = sql.fragment`id, account_id, email, role, invited_by, created_at, expires_at, accepted_at, revoked_at`;

/** SQL of the dashboard's people, sessions and invitations. */
export function dashboardStore(db: Db) {
  return {
    userWithPassword: (email: string) =>
      db.maybeOne(sql.type(UserRow.extend({ password_hash: z.string() }))`
        select ${userColumns}, password_hash from dashboard_users where email = ${email}`),

    findUser: (accountId: string, id: string) =>
      db.maybeOne(sql.type(UserRow)`
        select ${userColumns} from dashboard_users where id = ${id} and account_id = ${accountId}`),

    users: (accountId: string) =>
      db.any(sql.type(UserRow)`
        select ${userColumns} from dashboard_users where account_id = ${accountId} order by created_at, id`),

    /** The account's owners, locked: the last owner is never demoted or removed. */
    lockOwners: (accountId: string) =>
      db.anyFirst(sql.type(z.object({ id: z.string() }))`
        select id from dashboard_users where account_id = ${accountId} and role = 'owner' order by id for update`),

    insertUser: (user: {
      id: string;
      accountId: string;
      email: string;
      name: string;
      role: Role;
      passwordHash: string;
      at: Date;
    }) =>
      db.one(sql.type(UserRow)`
        insert into dashboard_users (id, account_id, email, name, role, password_hash, created_at)
        values (${user.id}, ${user.accountId}, ${user.email}, ${user.name}, ${user.role}, ${user.passwordHash},
                ${sql.timestamp(user.at)})
        returning ${userColumns}`),

    setRole: (accountId: string, id: string, role: Role) =>
      db.maybeOne(sql.type(UserRow)`
        update dashboard_users set role = ${role} where id = ${id} and account_id = ${accountId}
        returning ${userColumns}`),

    deleteUser: (accountId: string, id: string) =>
      db.maybeOne(sql.type(UserRow)`
        delete from dashboard_users where id = ${id} and account_id = ${accountId} returning ${userColumns}`),

    insertSession: (session: {
      id: string;
      userId: string;
      tokenHash: Buffer;
      userAgent: string;
      address: string;
      at: Date;
      expiresAt: Date;
    }) =>
      db.one(sql.type(SessionRow)`
        insert into dashboard_sessions (id, user_id, token_hash, user_agent, address, created_at, last_seen_at, expires_at)
        values (${session.id}, ${session.userId}, ${sql.binary(session.tokenHash)}, ${session.userAgent},
                ${session.address}, ${sql.timestamp(session.at)}, ${sql.timestamp(session.at)},
                ${sql.timestamp(session.expiresAt)})
        returning ${sessionColumns}`),

    /** A live session by its token's hash, with its user. */
    sessionByTokenHash: async (tokenHash: Buffer, at: Date, idleSince: Date) => {
      const row = await db.maybeOne(sql.type(
        SessionRow.extend({
          account_id: z.string(),
          email: z.string(),
          name: z.string(),
          role: UserRow.shape.role,
          user_created_at: z.date(),
        }),
      )`
        select s.id, s.user_id, s.user_agent, s.address, s.created_at, s.last_seen_at, s.expires_at,
               s.revoked_at, u.account_id, u.email, u.name, u.role, u.created_at as user_created_at
        from dashboard_sessions s join dashboard_users u on u.id = s.user_id
        where s.token_hash = ${sql.binary(tokenHash)} and s.revoked_at is null
          and s.expires_at > ${sql.timestamp(at)} and s.last_seen_at > ${sql.timestamp(idleSince)}`);
      if (!row) return null;
      const { account_id, email, name, role, user_created_at, ...session } = row;
      return {
        session,
        user: { id: row.user_id, account_id, email, name, role, created_at: user_created_at },
      };
    },

    touchSession: (id: string, at: Date) =>
      db.query(
        sql.unsafe`update dashboard_sessions set last_seen_at = ${sql.timestamp(at)} where id = ${id}`,
      ),

    /** Up to `limit` sessions and as many invitations that expired before `before`; answers how many went. */
    pruneExpired: async (before: Date, limit: number) =>
      db.oneFirst(sql.type(z.object({ count: z.number() }))`
        with sessions as (
          delete from dashboard_sessions where id in (
            select id from dashboard_sessions where expires_at < ${sql.timestamp(before)} limit ${limit})
          returning 1
        ), invites as (
          delete from dashboard_invites where id in (
            select id from dashboard_invites where expires_at < ${sql.timestamp(before)} limit ${limit})
          returning 1
        )
        select greatest((select count(*) from sessions), (select count(*) from invites))::int as count`),

    /** The live sessions of a user, newest first. */
    sessions: (userId: string, at: Date, idleSince: Date) =>
      db.any(sql.type(SessionRow)`
        select ${sessionColumns} from dashboard_sessions
        where user_id = ${userId} and revoked_at is null and expires_at > ${sql.timestamp(at)}
          and last_seen_at > ${sql.timestamp(idleSince)}
        order by created_at desc, id desc`),

    revokeSession: (userId: string, id: string, at: Date) =>
      db.maybeOne(sql.type(SessionRow)`
        update dashboard_sessions set revoked_at = coalesce(revoked_at, ${sql.timestamp(at)})
        where id = ${id} and user_id = ${userId} returning ${sessionColumns}`),

    insertInvite: (invite: {
      id: string;
      accountId: string;
      email: string;
      role: Role;
      tokenHash: Buffer;
      invitedBy: string | null;
      at: Date;
      expiresAt: Date;
    }) =>
      db.one(sql.type(InviteRow)`
        insert into dashboard_invites (id, account_id, email, role, token_hash, invited_by, created_at, expires_at)
        values (${invite.id}, ${invite.accountId}, ${invite.email}, ${invite.role}, ${sql.binary(invite.tokenHash)},
                ${invite.invitedBy}, ${sql.timestamp(invite.at)}, ${sql.timestamp(invite.expiresAt)})
        returning ${inviteColumns}`),

    /** An invitation that still works; `lock` holds it, so that it is accepted once. */
    openInvite: (tokenHash: Buffer, at: Date, lock = false) =>
      db.maybeOne(sql.type(InviteRow)`
        select ${inviteColumns} from dashboard_invites
        where token_hash = ${sql.binary(tokenHash)} and accepted_at is null and revoked_at is null
          and expires_at > ${sql.timestamp(at)}
        ${lock ? sql.fragment`for update` : sql.fragment``}`),

    acceptInvite: (id: string, at: Date) =>
      db.query(sql.unsafe`update dashboard_invites set accepted_at = ${sql.timestamp(at)} where id = ${id}`),

    /** The invitations still waiting, newest first. */
    openInvites: (accountId: string, at: Date) =>
      db.any(sql.type(InviteRow)`
        select ${inviteColumns} from dashboard_invites
        where account_id = ${accountId} and accepted_at is null and revoked_at is null
          and expires_at > ${sql.timestamp(at)}
        order by created_at desc, id desc`),

    /** Withdraws the open invitations someone issued (they leave, or stop being an owner). */
    revokeInvitesBy: (userId: string, at: Date) =>
      db.query(sql.unsafe`
        update dashboard_invites set revoked_at = ${sql.timestamp(at)}
        where invited_by = ${userId} and accepted_at is null and revoked_at is null`),

    setPassword: (userId: string, passwordHash: string) =>
      db.query(sql.unsafe`update dashboard_users set password_hash = ${passwordHash} where id = ${userId}`),

    passwordHash: (userId: string) =>
      db.oneFirst(sql.type(z.object({ password_hash: z.string() }))`
        select password_hash from dashboard_users where id = ${userId}`),

    /** Ends every live session of a user but one (null: all of them). */
    revokeSessionsOf: (userId: string, keep: string | null, at: Date) =>
      db.query(sql.unsafe`
        update dashboard_sessions set revoked_at = ${sql.timestamp(at)}
        where user_id = ${userId} and revoked_at is null and id is distinct from ${keep}`),

    revokeInvite: (accountId: string, id: string, at: Date) =>
      db.maybeOne(sql.type(InviteRow)`
        update dashboard_invites set revoked_at = coalesce(revoked_at, ${sql.timestamp(at)})
        where id = ${id} and account_id = ${accountId} and accepted_at is null
        returning ${inviteColumns}`),
  };
}
