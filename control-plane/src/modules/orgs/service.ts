import type { DatabasePool } from 'slonik';
import type { Principal } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors, ServiceError } from '../../platform/errors.js';
import { newId, randomBase62 } from '../../platform/ids.js';
import type { Db, Transaction } from '../../platform/transaction.js';
import {
  EMBEDDED_PAGE,
  type MemberRow,
  ORG_LIMITS,
  type OrgRow,
  type Policy,
  type Role,
  type TeamRow,
} from './schema.js';
import { type OrgChanges, orgsStore } from './store.js';

const iso = (date: Date) => date.toISOString();

const presentOrg = (row: OrgRow) => ({
  id: row.id,
  external_id: row.external_id,
  name: row.name,
  logo_url: row.logo_url,
  policy: row.policy,
  chat: row.chat_enabled,
  status: row.status,
  member_count: row.member_count,
  team_count: row.team_count,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
  deleted_at: row.deleted_at && iso(row.deleted_at),
});

const presentMember = (row: MemberRow) => ({
  id: row.id,
  ext_id: row.ext_id,
  user_id: row.user_id,
  role: row.role,
  title: row.title,
  status: row.status,
  teams: row.teams,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

const presentTeam = (row: TeamRow) => ({
  id: row.id,
  ext_id: row.ext_id,
  name: row.name,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

const orgDeleted = () =>
  new ServiceError('conflict', 'This org was deleted; its records are kept but it cannot change', {
    code: 'ORG_DELETED',
  });
const limitReached = (what: string, limit: number) =>
  new ServiceError('conflict', `An org holds at most ${limit.toLocaleString('en')} ${what}`, {
    code: 'LIMIT_REACHED',
  });

/**
 * The chat server's name of an org: 12 lowercase letters and digits (JID nodes are lowercase), drawn
 * afresh for every org, so that a re-created org never shares its identities or rooms with the old one.
 */
const newChatKey = () => randomBase62(12).toLowerCase();

export function createOrgsService(deps: { pool: DatabasePool; clock: Clock; cursors: Cursors }) {
  /** The org the path names (the live one, else the latest deleted one), or 404. */
  async function orgOf(db: Db, principal: Principal, externalId: string, lock = false) {
    const org = await orgsStore(db).org(principal, externalId, lock);
    if (!org) throw errors.notFound('Org');
    return org;
  }

  /** The org the path names, locked, that may still change. */
  async function changeableOrg(tx: Transaction, principal: Principal, externalId: string) {
    const org = await orgOf(tx, principal, externalId, true);
    if (org.status === 'deleted') throw orgDeleted();
    return org;
  }

  const memberPage = (db: Db, orgId: string, limit: number, cursor?: string) =>
    orgsStore(db)
      .members(orgId, limit, cursor === undefined ? undefined : deps.cursors.decode(cursor))
      .then((rows) => deps.cursors.page(rows, limit, presentMember));
  const teamPage = (db: Db, orgId: string, limit: number, cursor?: string) =>
    orgsStore(db)
      .teams(orgId, limit, cursor === undefined ? undefined : deps.cursors.decode(cursor))
      .then((rows) => deps.cursors.page(rows, limit, presentTeam));

  return {
    /** Creates the org of an external id, or updates the live one: `created` says which. */
    upsertOrg: async (
      principal: Principal,
      input: {
        externalId: string;
        name: string;
        logo_url?: string | null;
        policy?: Policy;
        chat?: boolean;
        replace_deleted?: boolean;
      },
      tx: Transaction,
    ) => {
      const store = orgsStore(tx);
      await store.lockAppOrgs(principal);
      const now = deps.clock.now();
      const existing = await store.org(principal, input.externalId, true);
      if (existing && existing.status !== 'deleted') {
        const org = await store.updateOrg(
          existing.id,
          {
            name: input.name,
            ...(input.logo_url === undefined ? {} : { logoUrl: input.logo_url }),
            ...(input.policy === undefined ? {} : { policy: input.policy }),
            ...(input.chat === undefined ? {} : { chatEnabled: input.chat }),
          },
          now,
        );
        return { created: false, org: presentOrg(org) };
      }
      if (existing && input.replace_deleted !== true) throw orgDeleted();
      if ((await store.liveOrgCount(principal)) >= ORG_LIMITS.orgsPerApp)
        throw new ServiceError(
          'conflict',
          `An app holds at most ${ORG_LIMITS.orgsPerApp} orgs per key mode`,
          {
            code: 'LIMIT_REACHED',
          },
        );
      const org = await store.createOrg(principal, {
        id: newId('org'),
        externalId: input.externalId,
        chatKey: newChatKey(),
        name: input.name,
        logoUrl: input.logo_url ?? null,
        policy: input.policy ?? 'anyone',
        chatEnabled: input.chat ?? true,
        at: now,
      });
      return { created: true, org: presentOrg(org) };
    },

    getOrg: async (principal: Principal, externalId: string) => {
      const org = await orgOf(deps.pool, principal, externalId);
      const [members, teams] = await Promise.all([
        memberPage(deps.pool, org.id, EMBEDDED_PAGE),
        teamPage(deps.pool, org.id, EMBEDDED_PAGE),
      ]);
      return { ...presentOrg(org), members, teams };
    },

    listOrgs: async (
      principal: Principal,
      query: { limit: number; cursor?: string; status?: OrgRow['status'] },
    ) => {
      const position = query.cursor === undefined ? undefined : deps.cursors.decode(query.cursor);
      const rows = await orgsStore(deps.pool).orgs(principal, query.status, query.limit, position);
      return deps.cursors.page(rows, query.limit, presentOrg);
    },

    changeOrg: async (
      principal: Principal,
      externalId: string,
      input: {
        name?: string;
        logo_url?: string | null;
        policy?: Policy;
        chat?: boolean;
        status?: 'active' | 'suspended';
      },
      tx: Transaction,
    ) => {
      const org = await changeableOrg(tx, principal, externalId);
      const changes: OrgChanges = {
        ...(input.name === undefined ? {} : { name: input.name }),
        ...(input.logo_url === undefined ? {} : { logoUrl: input.logo_url }),
        ...(input.policy === undefined ? {} : { policy: input.policy }),
        ...(input.chat === undefined ? {} : { chatEnabled: input.chat }),
        ...(input.status === undefined ? {} : { status: input.status }),
      };
      return presentOrg(await orgsStore(tx).updateOrg(org.id, changes, deps.clock.now()));
    },

    deleteOrg: async (principal: Principal, externalId: string, tx: Transaction) => {
      const org = await orgOf(tx, principal, externalId, true);
      if (org.status === 'deleted') throw errors.notFound('Org');
      await orgsStore(tx).deleteOrg(org.id, deps.clock.now());
      return { ok: true as const, id: externalId };
    },

    // ----- members ---------------------------------------------------------------------------------

    listMembers: async (
      principal: Principal,
      externalId: string,
      query: { limit: number; cursor?: string },
    ) => memberPage(deps.pool, (await orgOf(deps.pool, principal, externalId)).id, query.limit, query.cursor),

    /** Creates or updates a member: `created` says which. */
    putMember: async (
      principal: Principal,
      externalId: string,
      extId: string,
      input: {
        role?: Role;
        title?: string | null;
        user_id?: string | null;
        teams?: string[];
        status?: 'active' | 'disabled';
      },
      tx: Transaction,
    ) => {
      const org = await changeableOrg(tx, principal, externalId);
      const store = orgsStore(tx);
      const now = deps.clock.now();
      const existing = await store.member(org.id, extId);
      if (input.user_id) {
        const other = await store.memberOfUser(org.id, input.user_id, existing?.id ?? null);
        if (other !== null)
          throw new ServiceError('conflict', `User ${input.user_id} is already member ${other} of this org`, {
            code: 'USER_ALREADY_MEMBER',
          });
      }
      let memberId: string;
      if (existing) {
        memberId = existing.id;
        await store.updateMember(
          memberId,
          {
            ...(input.role === undefined ? {} : { role: input.role }),
            ...(input.title === undefined ? {} : { title: input.title }),
            ...(input.user_id === undefined ? {} : { userId: input.user_id }),
            ...(input.status === undefined ? {} : { status: input.status }),
          },
          now,
        );
      } else {
        if (org.member_count >= ORG_LIMITS.membersPerOrg)
          throw limitReached('members', ORG_LIMITS.membersPerOrg);
        memberId = newId('mem');
        await store.createMember(
          {
            id: memberId,
            orgId: org.id,
            extId,
            role: input.role ?? 'member',
            title: input.title ?? null,
            userId: input.user_id ?? null,
          },
          now,
        );
      }
      if (input.teams !== undefined) {
        const missing = await store.setMemberTeams(org.id, memberId, input.teams);
        if (missing.length > 0)
          throw errors.validation(
            missing.map((team) => ({
              in: 'body' as const,
              field: `teams.${input.teams!.indexOf(team)}`,
              message: `names no team of this org (${team}): create it with PUT /v1/orgs/{org}/teams/{ext_id}`,
            })),
          );
      }
      return { created: existing === null, member: presentMember((await store.member(org.id, extId))!) };
    },

    deleteMember: async (principal: Principal, externalId: string, extId: string, tx: Transaction) => {
      const org = await changeableOrg(tx, principal, externalId);
      const member = await orgsStore(tx).member(org.id, extId);
      if (!member) throw errors.notFound('Member');
      await orgsStore(tx).deleteMember(member.id);
      return { ok: true as const, id: extId };
    },

    // ----- teams -----------------------------------------------------------------------------------

    listTeams: async (principal: Principal, externalId: string, query: { limit: number; cursor?: string }) =>
      teamPage(deps.pool, (await orgOf(deps.pool, principal, externalId)).id, query.limit, query.cursor),

    putTeam: async (
      principal: Principal,
      externalId: string,
      extId: string,
      name: string,
      tx: Transaction,
    ) => {
      const org = await changeableOrg(tx, principal, externalId);
      const store = orgsStore(tx);
      const now = deps.clock.now();
      const existing = await store.team(org.id, extId);
      if (existing)
        return { created: false, team: presentTeam(await store.renameTeam(existing.id, name, now)) };
      if (org.team_count >= ORG_LIMITS.teamsPerOrg) throw limitReached('teams', ORG_LIMITS.teamsPerOrg);
      const team = await store.createTeam({ id: newId('team'), orgId: org.id, extId, name }, now);
      return { created: true, team: presentTeam(team) };
    },

    deleteTeam: async (principal: Principal, externalId: string, extId: string, tx: Transaction) => {
      const org = await changeableOrg(tx, principal, externalId);
      const team = await orgsStore(tx).team(org.id, extId);
      if (!team) throw errors.notFound('Team');
      await orgsStore(tx).deleteTeam(team.id);
      return { ok: true as const, id: extId };
    },
  };
}

export type OrgsService = ReturnType<typeof createOrgsService>;
