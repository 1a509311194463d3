import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import { INBOX_ROOM } from './business-schema.js';
import { type AnyRole, MemberRow, MembershipRow, OrgRow, type Policy, TeamRow } from './schema.js';

interface Scope {
  appId: string;
  mode: KeyMode;
}

const ORG_COLUMNS = [
  'id',
  'app_id',
  'mode',
  'external_id',
  'kind',
  'chat_key',
  'name',
  'logo_url',
  'policy',
  'chat_enabled',
  'status',
  'member_count',
  'team_count',
  'created_at',
  'updated_at',
  'deleted_at',
];
/** An org's columns, of the table or alias named (businesses join orgs as `o`). */
export const orgColumnsOf = (table: string) =>
  sql.join(
    ORG_COLUMNS.map((column) => sql.identifier([table, column])),
    sql.fragment`, `,
  );
const orgColumns = orgColumnsOf('orgs');

/** A member's columns (as `m`), with the ext_ids of their teams in ext_id order. */
export const memberColumns = sql.fragment`
  m.id, m.org_id, m.ext_id, m.identity_key, m.user_id, m.role, m.title, m.status, m.display_name, m.muted,
  m.created_at, m.updated_at,
  coalesce((select array_agg(t.ext_id order by t.ext_id)
            from org_team_members tm join org_teams t on t.id = tm.team_id
            where tm.member_id = m.id), '{}') as teams`;

const teamColumns = sql.fragment`id, org_id, ext_id, name, created_at, updated_at`;

/** Rows after a newest-first cursor position. */
export const after = (position: Position | undefined, table: string) =>
  position
    ? sql.fragment`and (${sql.identifier([table, 'created_at'])}, ${sql.identifier([table, 'id'])})
                       < (${sql.timestamp(position.createdAt)}, ${position.id})`
    : sql.fragment``;

export interface OrgChanges {
  name?: string;
  logoUrl?: string | null;
  policy?: Policy;
  chatEnabled?: boolean;
  status?: 'active' | 'suspended';
}

export interface MemberChanges {
  role?: AnyRole;
  title?: string | null;
  userId?: string | null;
  status?: MemberRow['status'];
  /**
   * A new identity (the member is linked to another user): the earlier user's own settings (display
   * name, mute) go with the earlier identity.
   */
  identityKey?: string;
}

/** SQL of orgs, their members and teams. */
export function orgsStore(db: Db) {
  return {
    /** How many orgs of each kind the app has in a mode, deleted ones left out. */
    countsByKind: (scope: Scope) =>
      db.any(sql.type(z.object({ kind: z.enum(['org', 'business', 'circle']), count: z.number().int() }))`
        select kind, count(*)::int as count from orgs
        where app_id = ${scope.appId} and mode = ${scope.mode} and status <> 'deleted'
        group by kind`),

    /**
     * The live org of an external id, else its latest deleted one. `update` holds its row against
     * every other write; `share` only against changes of the org itself (its status, chat, policy).
     */
    org: (scope: Scope, externalId: string, lock?: 'update' | 'share') =>
      db.maybeOne(sql.type(OrgRow)`
        select ${orgColumns} from orgs
        where app_id = ${scope.appId} and mode = ${scope.mode} and external_id = ${externalId}
        order by (status = 'deleted'), deleted_at desc
        limit 1
        ${lock === 'update' ? sql.fragment`for update` : lock === 'share' ? sql.fragment`for share` : sql.fragment``}`),

    /**
     * Every team room of the app's orgs that are not deleted (a business's groups among them), and
     * each business's inbox staff room (named `inbox`): each org's key and the room's name.
     */
    teamRooms: (scope: Scope) =>
      db.any(sql.type(z.object({ chat_key: z.string(), ext_id: z.string(), inbox: z.boolean() }))`
        select o.chat_key, t.ext_id, false as inbox from org_teams t join orgs o on o.id = t.org_id
        where o.app_id = ${scope.appId} and o.mode = ${scope.mode} and o.status <> 'deleted'
        union all
        select o.chat_key, ${INBOX_ROOM}, true from orgs o
        where o.app_id = ${scope.appId} and o.mode = ${scope.mode} and o.status <> 'deleted'
          and o.kind = 'business'`),

    orgById: (orgId: string) =>
      db.maybeOne(sql.type(OrgRow)`select ${orgColumns} from orgs where id = ${orgId}`),

    orgByChatKey: (chatKey: string) =>
      db.maybeOne(sql.type(OrgRow)`select ${orgColumns} from orgs where chat_key = ${chatKey}`),

    /** The identity keys of every member of an org (to revoke their identities together). */
    memberIdentityKeys: (orgId: string) =>
      db.anyFirst(sql.type(z.object({ identity_key: z.string() }))`
        select identity_key from org_members where org_id = ${orgId}`),

    /** The member an org identity's key names. */
    memberByIdentityKey: (orgId: string, identityKey: string) =>
      db.maybeOne(sql.type(MemberRow)`
        select ${memberColumns} from org_members m where m.org_id = ${orgId} and m.identity_key = ${identityKey}`),

    /** Whether two members are in a team together. */
    shareTeam: (memberA: string, memberB: string) =>
      db.exists(sql.type(z.object({ exists: z.boolean() }))`
        select 1 from org_team_members a join org_team_members b on b.team_id = a.team_id
        where a.member_id = ${memberA} and b.member_id = ${memberB}`),

    /** The identity keys of a team's members (to take them out of its room). */
    teamMemberIdentityKeys: (teamId: string) =>
      db.anyFirst(sql.type(z.object({ identity_key: z.string() }))`
        select m.identity_key from org_team_members tm join org_members m on m.id = tm.member_id
        where tm.team_id = ${teamId}`),

    /** One create or update of an app's orgs at a time: external ids stay unique and the count holds. */
    lockAppOrgs: (scope: Scope) =>
      db.query(sql.unsafe`
        select pg_advisory_xact_lock(hashtextextended(${`orgs\t${scope.appId}\t${scope.mode}`}, 0))`),

    liveOrgCount: (scope: Scope) =>
      db.oneFirst(sql.type(z.object({ count: z.number().int() }))`
        select count(*)::int as count from orgs
        where app_id = ${scope.appId} and mode = ${scope.mode} and status <> 'deleted' and kind = 'org'`),

    createOrg: (
      scope: Scope,
      org: {
        id: string;
        externalId: string;
        kind: OrgRow['kind'];
        chatKey: string;
        name: string;
        logoUrl: string | null;
        policy: Policy;
        chatEnabled: boolean;
        at: Date;
      },
    ) =>
      db.one(sql.type(OrgRow)`
        insert into orgs (id, app_id, mode, external_id, kind, chat_key, name, logo_url, policy, chat_enabled,
                          status, created_at, updated_at)
        values (${org.id}, ${scope.appId}, ${scope.mode}, ${org.externalId}, ${org.kind}, ${org.chatKey}, ${org.name},
                ${org.logoUrl}, ${org.policy}, ${org.chatEnabled}, 'active', ${sql.timestamp(org.at)},
                ${sql.timestamp(org.at)})
        returning ${orgColumns}`),

    updateOrg: (orgId: string, changes: OrgChanges, at: Date) =>
      db.one(sql.type(OrgRow)`
        update orgs set
          name = coalesce(${changes.name ?? null}, name),
          logo_url = ${changes.logoUrl === undefined ? sql.fragment`logo_url` : sql.fragment`${changes.logoUrl}`},
          policy = coalesce(${changes.policy ?? null}, policy),
          chat_enabled = coalesce(${changes.chatEnabled ?? null}, chat_enabled),
          status = coalesce(${changes.status ?? null}, status),
          updated_at = ${sql.timestamp(at)}
        where id = ${orgId}
        returning ${orgColumns}`),

    deleteOrg: (orgId: string, at: Date) =>
      db.one(sql.type(OrgRow)`
        update orgs set status = 'deleted', deleted_at = ${sql.timestamp(at)}, updated_at = ${sql.timestamp(at)}
        where id = ${orgId}
        returning ${orgColumns}`),

    orgs: (scope: Scope, status: OrgRow['status'] | undefined, limit: number, position?: Position) =>
      db.any(sql.type(OrgRow)`
        select ${orgColumns} from orgs
        where app_id = ${scope.appId} and mode = ${scope.mode}
          ${status ? sql.fragment`and status = ${status}` : sql.fragment``}
          ${after(position, 'orgs')}
        order by created_at desc, id desc
        limit ${limit + 1}`),

    // ----- members ---------------------------------------------------------------------------------

    /** A member; `share` holds its row against changes until the transaction ends. */
    member: (orgId: string, extId: string, lock?: 'share') =>
      db.maybeOne(sql.type(MemberRow)`
        select ${memberColumns} from org_members m where m.org_id = ${orgId} and m.ext_id = ${extId}
        ${lock === 'share' ? sql.fragment`for share of m` : sql.fragment``}`),

    members: (orgId: string, limit: number, position?: Position) =>
      db.any(sql.type(MemberRow)`
        select ${memberColumns} from org_members m
        where m.org_id = ${orgId} ${after(position, 'm')}
        order by m.created_at desc, m.id desc
        limit ${limit + 1}`),

    /**
     * The active members `me` may open a 1:1 with under the org's policy (policy.ts says the same
     * pair by pair): everyone for an admin; the admins for anyone; teammates when either is a guest
     * or the policy is `teams`; everyone else under `anyone`. Newest first.
     */
    directory: (org: OrgRow, me: MemberRow, limit: number, position?: Position) =>
      db.any(sql.type(MemberRow)`
        with teammates as (
          select distinct b.member_id from org_team_members a
          join org_team_members b on b.team_id = a.team_id
          where a.member_id = ${me.id})
        select ${memberColumns} from org_members m
        where m.org_id = ${org.id} and m.id <> ${me.id} and m.status = 'active'
          and (${me.role} in ('admin', 'owner') or m.role in ('admin', 'owner')
               or ((${me.role} = 'guest' or m.role = 'guest' or ${org.policy} = 'teams')
                   and m.id in (select member_id from teammates))
               or (${me.role} <> 'guest' and m.role <> 'guest' and ${org.policy} = 'anyone'))
          ${after(position, 'm')}
        order by m.created_at desc, m.id desc
        limit ${limit + 1}`),

    /** A user's memberships in the app's orgs that are not deleted, newest first, with their org. */
    membershipsOf: (scope: Scope, userId: string, limit: number, position?: Position) =>
      db.any(sql.type(MembershipRow)`
        select ${memberColumns}, o.external_id as org_external_id, o.kind as org_kind, o.name as org_name,
               o.logo_url as org_logo_url, o.status as org_status, o.chat_enabled as org_chat,
               o.chat_key as org_chat_key
        from org_members m join orgs o on o.id = m.org_id
        where m.user_id = ${userId} and o.app_id = ${scope.appId} and o.mode = ${scope.mode}
          and o.status <> 'deleted' and m.status in ('active', 'disabled') ${after(position, 'm')}
        order by m.created_at desc, m.id desc
        limit ${limit + 1}`),

    /** A user's own membership by its id, in an org of the app that is not deleted. */
    membershipOf: (scope: Scope, userId: string, memberId: string) =>
      db.maybeOne(sql.type(MembershipRow)`
        select ${memberColumns}, o.external_id as org_external_id, o.kind as org_kind, o.name as org_name,
               o.logo_url as org_logo_url, o.status as org_status, o.chat_enabled as org_chat,
               o.chat_key as org_chat_key
        from org_members m join orgs o on o.id = m.org_id
        where m.id = ${memberId} and m.user_id = ${userId} and o.app_id = ${scope.appId}
          and o.mode = ${scope.mode} and o.status <> 'deleted' and m.status in ('active', 'disabled')`),

    /** The user's own settings for a membership. */
    /** Sets a member's own settings while it is still the user's; answers whether it was. */
    setOwnSettings: async (
      memberId: string,
      userId: string,
      settings: { displayName?: string | null; muted?: boolean },
      at: Date,
    ) =>
      (
        await db.query(sql.unsafe`
          update org_members set
            display_name = ${settings.displayName === undefined ? sql.fragment`display_name` : sql.fragment`${settings.displayName}`},
            muted = coalesce(${settings.muted ?? null}, muted),
            updated_at = ${sql.timestamp(at)}
          where id = ${memberId} and user_id = ${userId}`)
      ).rowCount === 1,

    /** The member linked to a user in an org, other than `exceptId`. */
    memberOfUser: (orgId: string, userId: string, exceptId: string | null) =>
      db.maybeOneFirst(sql.type(z.object({ ext_id: z.string() }))`
        select ext_id from org_members
        where org_id = ${orgId} and user_id = ${userId} and id is distinct from ${exceptId}`),

    createMember: (
      member: {
        id: string;
        orgId: string;
        extId: string;
        role: AnyRole;
        title: string | null;
        userId: string | null;
        status: MemberRow['status'];
        identityKey: string;
      },
      at: Date,
    ) =>
      db.query(sql.unsafe`
        with inserted as (
          insert into org_members (id, org_id, ext_id, identity_key, user_id, role, title, status, created_at,
                                   updated_at)
          values (${member.id}, ${member.orgId}, ${member.extId}, ${member.identityKey}, ${member.userId}, ${member.role},
                  ${member.title}, ${member.status}, ${sql.timestamp(at)}, ${sql.timestamp(at)})
          returning org_id)
        update orgs set member_count = member_count + 1 where id = (select org_id from inserted)`),

    updateMember: (memberId: string, changes: MemberChanges, at: Date) =>
      db.query(sql.unsafe`
        update org_members set
          role = coalesce(${changes.role ?? null}, role),
          title = ${changes.title === undefined ? sql.fragment`title` : sql.fragment`${changes.title}`},
          user_id = ${changes.userId === undefined ? sql.fragment`user_id` : sql.fragment`${changes.userId}`},
          status = coalesce(${changes.status ?? null}, status),
          identity_key = coalesce(${changes.identityKey ?? null}, identity_key),
          ${
            changes.identityKey === undefined
              ? sql.fragment``
              : sql.fragment`display_name = null, muted = false,`
          }
          updated_at = ${sql.timestamp(at)}
        where id = ${memberId}`),

    deleteMember: (memberId: string) =>
      db.query(sql.unsafe`
        with deleted as (delete from org_members where id = ${memberId} returning org_id)
        update orgs set member_count = member_count - 1 where id = (select org_id from deleted)`),

    /** Replaces a member's teams; answers the ext_ids of those that do not exist. */
    setMemberTeams: async (orgId: string, memberId: string, teamExtIds: readonly string[]) => {
      const teams = await db.any(sql.type(z.object({ id: z.string(), ext_id: z.string() }))`
        select id, ext_id from org_teams
        where org_id = ${orgId} and ext_id = any(${sql.array(teamExtIds, 'text')})`);
      const found = new Set(teams.map((team) => team.ext_id));
      const missing = teamExtIds.filter((extId) => !found.has(extId));
      if (missing.length > 0) return missing;
      const ids = teams.map((team) => team.id);
      await db.query(sql.unsafe`
        delete from org_team_members
        where member_id = ${memberId} and not (team_id = any(${sql.array(ids, 'text')}))`);
      await db.query(sql.unsafe`
        insert into org_team_members (team_id, member_id)
        select unnest(${sql.array(ids, 'text')}), ${memberId}
        on conflict do nothing`);
      return [];
    },

    // ----- teams -----------------------------------------------------------------------------------

    team: (orgId: string, extId: string) =>
      db.maybeOne(sql.type(TeamRow)`
        select ${teamColumns} from org_teams where org_id = ${orgId} and ext_id = ${extId}`),

    teams: (orgId: string, limit: number, position?: Position) =>
      db.any(sql.type(TeamRow)`
        select ${teamColumns} from org_teams t
        where t.org_id = ${orgId} ${after(position, 't')}
        order by t.created_at desc, t.id desc
        limit ${limit + 1}`),

    createTeam: (team: { id: string; orgId: string; extId: string; name: string }, at: Date) =>
      db.one(sql.type(TeamRow)`
        with inserted as (
          insert into org_teams (id, org_id, ext_id, name, created_at, updated_at)
          values (${team.id}, ${team.orgId}, ${team.extId}, ${team.name}, ${sql.timestamp(at)},
                  ${sql.timestamp(at)})
          returning ${teamColumns}),
        counted as (update orgs set team_count = team_count + 1 where id = ${team.orgId})
        select * from inserted`),

    renameTeam: (teamId: string, name: string, at: Date) =>
      db.one(sql.type(TeamRow)`
        update org_teams set name = ${name}, updated_at = ${sql.timestamp(at)} where id = ${teamId}
        returning ${teamColumns}`),

    deleteTeam: (teamId: string) =>
      db.query(sql.unsafe`
        with deleted as (delete from org_teams where id = ${teamId} returning org_id)
        update orgs set team_count = team_count - 1 where id = (select org_id from deleted)`),
  };
}

export type OrgsStore = ReturnType<typeof orgsStore>;
