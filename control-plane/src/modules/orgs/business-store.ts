import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import {
  type BusinessRole,
  BusinessRow,
  CodeRow,
  ConversationRow,
  type PERSON_STATUSES,
  StaffRow,
} from './business-schema.js';
import { MemberRow, OrgRow } from './schema.js';
import { after, memberColumns, orgColumnsOf } from './store.js';

interface Scope {
  appId: string;
  mode: KeyMode;
}

const businessColumns = sql.fragment`
  b.org_id, b.access, b.calls, b.front_desk, b.greeting, b.staff_names, b.inbox_id, b.inbox_name,
  b.inbox_line, b.shortcuts, b.next_staff_number`;

const orgColumns = orgColumnsOf('o');

const staffColumns = sql.fragment`s.member_id, m.identity_key, m.title, s.may_reply, s.number, m.status`;

const conversationColumns = sql.fragment`
  id, org_id, user_id, room_key, customer_name, opened_by, created_at, reopened_at`;

/** A business (its org and its settings), with the caller's role when they have one. */
export const BusinessOrgRow = OrgRow.merge(BusinessRow.omit({ org_id: true })).extend({
  code: z.string().nullable(),
  my_role: z.enum(['owner', 'admin', 'staff']).nullable(),
});
export type BusinessOrgRow = z.infer<typeof BusinessOrgRow>;

/** A person of the team, with their place in the inbox. */
export const PersonRow = MemberRow.extend({
  may_reply: z.boolean().nullable(),
  number: z.number().nullable(),
});
export type PersonRow = z.infer<typeof PersonRow>;

export const InviteRow = z.object({
  id: z.string(),
  kind: z.enum(['business', 'circle']),
  role: z.enum(['admin', 'staff', 'mod', 'member']),
  title: z.string().nullable(),
  created_at: z.date(),
  org_id: z.string(),
  org_name: z.string(),
  org_logo_url: z.string().nullable(),
});
export type InviteRow = z.infer<typeof InviteRow>;

export interface BusinessChanges {
  access?: BusinessRow['access'];
  calls?: boolean;
  frontDesk?: BusinessRow['front_desk'];
  greeting?: string | null;
  staffNames?: BusinessRow['staff_names'];
  inboxName?: string;
  inboxLine?: string | null;
  shortcuts?: BusinessRow['shortcuts'];
}

/** SQL of businesses, codes, the inbox's staff, conversations, invites and refusals. */
export function businessStore(db: Db) {
  /** A business with its org and code; `me` adds the user's role (null when not an active member). */
  const businessSelect = (me: string | null) => sql.fragment`
    select ${orgColumns}, ${businessColumns},
           (select c.code from codes c where c.org_id = o.id) as code,
           (select m.role from org_members m
            where m.org_id = o.id and m.user_id = ${me} and m.status = 'active') as my_role
    from orgs o join businesses b on b.org_id = o.id`;

  return {
    // ----- businesses ------------------------------------------------------------------------------

    /**
     * A business of the app by its id; `update` holds it (and its settings) against other writes,
     * `share` only against changes (conversations open side by side, never beside a staff change).
     */
    business: (scope: Scope, orgId: string, me: string | null, lock?: 'update' | 'share') =>
      db.maybeOne(sql.type(BusinessOrgRow)`
        ${businessSelect(me)}
        where o.id = ${orgId} and o.app_id = ${scope.appId} and o.mode = ${scope.mode} and o.kind = 'business'
        ${lock === 'update' ? sql.fragment`for update of o, b` : lock === 'share' ? sql.fragment`for share of o, b` : sql.fragment``}`),

    /** The business an org key names (the chat server's questions name it so), or null. */
    businessByChatKey: (chatKey: string) =>
      db.maybeOne(sql.type(BusinessOrgRow)`${businessSelect(null)} where o.chat_key = ${chatKey}`),

    /** The businesses a user owns or administers (not deleted), newest first. */
    businessesOf: (scope: Scope, userId: string, limit: number, position?: Position) =>
      db.any(sql.type(BusinessOrgRow)`
        ${businessSelect(userId)}
        join org_members me on me.org_id = o.id and me.user_id = ${userId}
        where o.app_id = ${scope.appId} and o.mode = ${scope.mode} and o.kind = 'business'
          and o.status <> 'deleted' and me.status = 'active' and me.role in ('owner', 'admin')
          ${after(position, 'o')}
        order by o.created_at desc, o.id desc
        limit ${limit + 1}`),

    /** One registration or hand-over to a user at a time: their count of businesses holds. */
    lockOwner: (scope: Scope, userId: string) =>
      db.query(sql.unsafe`
        select pg_advisory_xact_lock(hashtextextended(${`business-owner\t${scope.appId}\t${scope.mode}\t${userId}`}, 0))`),

    /** How many live businesses (or circles) a user owns (the caller holds lockOwner). */
    ownedCount: (scope: Scope, userId: string, kind: 'business' | 'circle' = 'business') =>
      db.oneFirst(sql.type(z.object({ count: z.number() }))`
        select count(*)::int as count from org_members m join orgs o on o.id = m.org_id
        where m.user_id = ${userId} and m.role = 'owner' and o.kind = ${kind} and o.status <> 'deleted'
          and o.app_id = ${scope.appId} and o.mode = ${scope.mode}`),

    createBusiness: (row: Omit<BusinessRow, 'shortcuts' | 'next_staff_number'>) =>
      db.query(sql.unsafe`
        insert into businesses (org_id, access, calls, front_desk, greeting, staff_names, inbox_id, inbox_name,
                                inbox_line)
        values (${row.org_id}, ${row.access}, ${row.calls}, ${row.front_desk}, ${row.greeting},
                ${row.staff_names}, ${row.inbox_id}, ${row.inbox_name}, ${row.inbox_line})`),

    updateBusiness: (orgId: string, changes: BusinessChanges) =>
      db.query(sql.unsafe`
        update businesses set
          access = coalesce(${changes.access ?? null}, access),
          calls = coalesce(${changes.calls ?? null}, calls),
          front_desk = coalesce(${changes.frontDesk ?? null}, front_desk),
          greeting = ${changes.greeting === undefined ? sql.fragment`greeting` : sql.fragment`${changes.greeting}`},
          staff_names = coalesce(${changes.staffNames ?? null}, staff_names),
          inbox_name = coalesce(${changes.inboxName ?? null}, inbox_name),
          inbox_line = ${changes.inboxLine === undefined ? sql.fragment`inbox_line` : sql.fragment`${changes.inboxLine}`},
          shortcuts = coalesce(${changes.shortcuts ? sql.jsonb(changes.shortcuts) : null}::jsonb, shortcuts)
        where org_id = ${orgId}`),

    /** Whether calls are on for a business (false for any other org id). */
    /** Whether a business's or a circle's calls are on. */
    callsOn: (orgId: string) =>
      db.exists(sql.type(z.object({ exists: z.boolean() }))`
        select 1 from businesses where org_id = ${orgId} and calls
        union all select 1 from circles where org_id = ${orgId} and calls`),

    // ----- codes -----------------------------------------------------------------------------------

    code: (scope: Scope, code: string) =>
      db.maybeOne(sql.type(CodeRow)`
        select code, user_id, org_id, created_at from codes
        where app_id = ${scope.appId} and mode = ${scope.mode} and code = ${code}`),

    codeOfUser: (scope: Scope, userId: string) =>
      db.maybeOne(sql.type(CodeRow)`
        select code, user_id, org_id, created_at from codes
        where app_id = ${scope.appId} and mode = ${scope.mode} and user_id = ${userId}`),

    /** Takes a code for a user or a business; false when the code is taken or the owner has one. */
    insertCode: async (scope: Scope, code: string, owner: { userId: string } | { orgId: string }, at: Date) =>
      (
        await db.query(sql.unsafe`
          insert into codes (app_id, mode, code, user_id, org_id, created_at)
          values (${scope.appId}, ${scope.mode}, ${code}, ${'userId' in owner ? owner.userId : null},
                  ${'orgId' in owner ? owner.orgId : null}, ${sql.timestamp(at)})
          on conflict do nothing`)
      ).rowCount === 1,

    deleteCodeOfUser: (scope: Scope, userId: string) =>
      db.query(sql.unsafe`
        delete from codes where app_id = ${scope.appId} and mode = ${scope.mode} and user_id = ${userId}`),

    deleteCodeOfOrg: (orgId: string) => db.query(sql.unsafe`delete from codes where org_id = ${orgId}`),

    // ----- people ----------------------------------------------------------------------------------

    people: (
      orgId: string,
      status: (typeof PERSON_STATUSES)[number] | undefined,
      limit: number,
      position?: Position,
    ) =>
      db.any(sql.type(PersonRow)`
        select ${memberColumns}, s.may_reply, s.number
        from org_members m left join business_staff s on s.member_id = m.id
        where m.org_id = ${orgId} ${status ? sql.fragment`and m.status = ${status}` : sql.fragment``}
          ${after(position, 'm')}
        order by m.created_at desc, m.id desc
        limit ${limit + 1}`),

    person: (orgId: string, memberId: string, lock?: 'update') =>
      db.maybeOne(sql.type(PersonRow)`
        select ${memberColumns}, s.may_reply, s.number
        from org_members m left join business_staff s on s.member_id = m.id
        where m.org_id = ${orgId} and m.id = ${memberId}
        ${lock ? sql.fragment`for update of m` : sql.fragment``}`),

    /** The people of the team among `memberIds`, whatever their status. */
    persons: (orgId: string, memberIds: readonly string[]) =>
      db.any(sql.type(PersonRow)`
        select ${memberColumns}, s.may_reply, s.number
        from org_members m left join business_staff s on s.member_id = m.id
        where m.org_id = ${orgId} and m.id = any(${sql.array(memberIds, 'text')})`),

    personOfUser: (orgId: string, userId: string) =>
      db.maybeOne(sql.type(PersonRow)`
        select ${memberColumns}, s.may_reply, s.number
        from org_members m left join business_staff s on s.member_id = m.id
        where m.org_id = ${orgId} and m.user_id = ${userId}`),

    /**
     * People of the team among `memberIds` with one of `statuses` (the others are missing, or in
     * another status).
     */
    peopleAmong: (orgId: string, memberIds: readonly string[], statuses: readonly MemberRow['status'][]) =>
      db.any(sql.type(MemberRow)`
        select ${memberColumns} from org_members m
        where m.org_id = ${orgId} and m.id = any(${sql.array(memberIds, 'text')})
          and m.status = any(${sql.array(statuses, 'text')})`),

    setRole: (memberId: string, role: BusinessRole, at: Date) =>
      db.query(sql.unsafe`
        update org_members set role = ${role}, updated_at = ${sql.timestamp(at)} where id = ${memberId}`),

    // ----- the inbox's staff -----------------------------------------------------------------------

    /** Everyone who works the inbox, in number order. */
    staff: (orgId: string) =>
      db.any(sql.type(StaffRow)`
        select ${staffColumns} from business_staff s join org_members m on m.id = s.member_id
        where s.org_id = ${orgId}
        order by s.number`),

    /** One person's place on the inbox's staff, or null when they do not work it. */
    staffMember: (memberId: string) =>
      db.maybeOne(sql.type(StaffRow)`
        select ${staffColumns} from business_staff s join org_members m on m.id = s.member_id
        where s.member_id = ${memberId}`),

    /**
     * Makes `entries` the inbox's staff: the others leave it, those already in keep their number, the
     * new ones take the next numbers (the caller holds the business's row).
     */
    replaceStaff: async (orgId: string, entries: readonly { memberId: string; mayReply: boolean }[]) => {
      const ids = entries.map((entry) => entry.memberId);
      await db.query(sql.unsafe`
        delete from business_staff where org_id = ${orgId} and not (member_id = any(${sql.array(ids, 'text')}))`);
      await db.query(sql.unsafe`
        with entries as (
          select * from unnest(${sql.array(ids, 'text')}::text[],
                               ${sql.array(
                                 entries.map((entry) => entry.mayReply),
                                 'bool',
                               )}::bool[]) with ordinality as e(member_id, may_reply, position)),
        fresh as (
          select e.member_id, e.may_reply,
                 (select next_staff_number from businesses where org_id = ${orgId})
                   + row_number() over (order by e.position) - 1 as number
          from entries e
          where not exists (select 1 from business_staff s where s.member_id = e.member_id)),
        inserted as (
          insert into business_staff (member_id, org_id, may_reply, number)
          select member_id, ${orgId}, may_reply, number from fresh
          returning number),
        updated as (
          update business_staff s set may_reply = e.may_reply
          from entries e where s.member_id = e.member_id and s.org_id = ${orgId})
        update businesses set next_staff_number = next_staff_number + (select count(*) from inserted)
        where org_id = ${orgId}`);
    },

    // ----- conversations ---------------------------------------------------------------------------

    conversation: (orgId: string, userId: string, lock?: 'update') =>
      db.maybeOne(sql.type(ConversationRow)`
        select ${conversationColumns} from business_conversations
        where org_id = ${orgId} and user_id = ${userId}
        ${lock ? sql.fragment`for update` : sql.fragment``}`),

    conversationByRoomKey: (orgId: string, roomKey: string) =>
      db.maybeOne(sql.type(ConversationRow)`
        select ${conversationColumns} from business_conversations
        where org_id = ${orgId} and room_key = ${roomKey}`),

    /** Opens a conversation, or answers null when one already exists (another request made it). */
    createConversation: (row: ConversationRow) =>
      db.maybeOne(sql.type(ConversationRow)`
        insert into business_conversations (id, org_id, user_id, room_key, customer_name, opened_by, created_at,
                                            reopened_at)
        values (${row.id}, ${row.org_id}, ${row.user_id}, ${row.room_key}, ${row.customer_name}, ${row.opened_by},
                ${sql.timestamp(row.created_at)}, ${sql.timestamp(row.reopened_at)})
        on conflict (org_id, user_id) do nothing
        returning ${conversationColumns}`),

    /**
     * Reopens a conversation; reopened by the business, it is one the business opened (who may chat
     * while access is `invited`), whoever opened it first.
     */
    reopenConversation: (id: string, at: Date, openedBy: 'customer' | 'business') =>
      db.one(sql.type(ConversationRow)`
        update business_conversations set reopened_at = ${sql.timestamp(at)},
          opened_by = case when ${openedBy} = 'business' then 'business' else opened_by end
        where id = ${id}
        returning ${conversationColumns}`),

    /** The room keys of every conversation of a business (to bring them all to a change). */
    conversationRoomKeys: (orgId: string) =>
      db.anyFirst(sql.type(z.object({ room_key: z.string() }))`
        select room_key from business_conversations where org_id = ${orgId}`),

    conversations: (orgId: string, limit: number, position?: Position) =>
      db.any(sql.type(ConversationRow)`
        select ${conversationColumns} from business_conversations c
        where c.org_id = ${orgId} ${after(position, 'c')}
        order by c.created_at desc, c.id desc
        limit ${limit + 1}`),

    // ----- invites and refusals --------------------------------------------------------------------

    invitesOf: (scope: Scope, userId: string, limit: number, position?: Position) =>
      db.any(sql.type(InviteRow)`
        select m.id, o.kind, m.role, m.title, m.created_at, o.id as org_id, o.name as org_name,
               o.logo_url as org_logo_url
        from org_members m join orgs o on o.id = m.org_id
        where m.user_id = ${userId} and m.status = 'invited' and o.app_id = ${scope.appId}
          and o.mode = ${scope.mode} and o.status = 'active' ${after(position, 'm')}
        order by m.created_at desc, m.id desc
        limit ${limit + 1}`),

    /** One of the user's invites, its business held against other writes. */
    inviteOf: (scope: Scope, userId: string, inviteId: string) =>
      db.maybeOne(sql.type(InviteRow)`
        select m.id, o.kind, m.role, m.title, m.created_at, o.id as org_id, o.name as org_name,
               o.logo_url as org_logo_url
        from org_members m join orgs o on o.id = m.org_id
        where m.id = ${inviteId} and m.user_id = ${userId} and m.status = 'invited'
          and o.app_id = ${scope.appId} and o.mode = ${scope.mode} and o.status = 'active'
        for update of o, m`),

    refused: (orgId: string, userId: string) =>
      db.exists(sql.type(z.object({ exists: z.boolean() }))`
        select 1 from business_refusals where org_id = ${orgId} and user_id = ${userId}`),

    refuse: (orgId: string, userId: string, at: Date) =>
      db.query(sql.unsafe`
        insert into business_refusals (org_id, user_id, created_at)
        values (${orgId}, ${userId}, ${sql.timestamp(at)})
        on conflict do nothing`),

    forgetRefusal: (orgId: string, userId: string) =>
      db.query(sql.unsafe`delete from business_refusals where org_id = ${orgId} and user_id = ${userId}`),

    // ----- groups and bookmarks --------------------------------------------------------------------

    addToTeam: (teamId: string, memberIds: readonly string[]) =>
      db.query(sql.unsafe`
        insert into org_team_members (team_id, member_id)
        select ${teamId}, unnest(${sql.array(memberIds, 'text')}::text[])
        on conflict do nothing`),

    /** The groups (org teams) a member is in: what their bookmarks list besides the inbox. */
    /** The groups of each of `memberIds`, oldest first. */
    groupsOf: (memberIds: readonly string[]) =>
      db.any(sql.type(z.object({ member_id: z.string(), ext_id: z.string(), name: z.string() }))`
        select tm.member_id, t.ext_id, t.name from org_team_members tm join org_teams t on t.id = tm.team_id
        where tm.member_id = any(${sql.array(memberIds, 'text')})
        order by t.created_at, t.id`),
  };
}
