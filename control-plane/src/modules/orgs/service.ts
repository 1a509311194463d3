import type { DatabasePool } from 'slonik';
import type { EjabberdClient } from '../../adapters/ejabberd.js';
import type { AdmissionScript } from '../../platform/admission.js';
import type { AppScope, Principal, UserPrincipal } from '../../platform/caller.js';
import { type Clock, utcDay } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors, ServiceError } from '../../platform/errors.js';
import {
  nodeOf,
  ORG_IDENTITY_MARKER,
  orgNode,
  orgNodePrefix,
  parseOrgNode,
} from '../../platform/identities.js';
import { newId } from '../../platform/ids.js';
import { type Db, inTransaction, type Transaction } from '../../platform/transaction.js';
import type { BillingService } from '../billing/service.js';
import type { ChatService } from '../chat/service.js';
import type { LiveService } from '../live/service.js';
import type { RealtimeService } from '../realtime/service.js';
import { INBOX_ROOM_SHAPE, TEAM_ROOM_SHAPE } from './business-schema.js';
import { businessStore } from './business-store.js';
import { newChatKey, newNodeKey } from './keys.js';
import { policyAllows } from './policy.js';
import {
  DEFAULT_USAGE_WINDOW_DAYS,
  EMBEDDED_PAGE,
  MAX_USAGE_WINDOW_DAYS,
  type MemberRow,
  type MembershipRow,
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
  kind: row.kind,
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

/** A business's or a circle's org changes only through its owner and admins (/v1/me/…). */
const userOrg = (kind: OrgRow['kind']) =>
  kind === 'circle'
    ? new ServiceError(
        'conflict',
        'This org is a circle, started by an app user: it is managed through /v1/me/circles by its owner and admins',
        { code: 'CIRCLE_ORG' },
      )
    : new ServiceError(
        'conflict',
        'This org is a business, registered by an app user: it is managed through /v1/me/businesses by its owner and admins',
        { code: 'BUSINESS_ORG' },
      );

const orgDeleted = () =>
  new ServiceError('conflict', 'This org was deleted; its records are kept but it cannot change', {
    code: 'ORG_DELETED',
  });
const limitReached = (message: string) => new ServiceError('conflict', message, { code: 'LIMIT_REACHED' });
const orgLimitReached = (what: string, limit: number) =>
  limitReached(`An org holds at most ${limit.toLocaleString('en')} ${what}`);

const DAY_MS = 86_400_000;

/** The signed-in user acting on their own membership (/v1/me). */
interface Owner {
  memberId: string;
  userId: string;
}

type Admit = (script: AdmissionScript, keys: string[], args: (string | number)[]) => Promise<unknown>;

/** Why an org identity cannot have chat now (403). */
const noChat = (message: string, code: string) => new ServiceError('permission_error', message, { code });

export function createOrgsService(deps: {
  pool: DatabasePool;
  clock: Clock;
  cursors: Cursors;
  realtime: RealtimeService;
  chat: ChatService;
  live: LiveService;
  billing: BillingService;
  ejabberd: EjabberdClient;
  chatDomain: string;
}) {
  const jid = (node: string) => `${node}@${deps.chatDomain}`;
  /** The app's chat prefix, its realtime settings made if needed. */
  const prefixOf = async (principal: Principal) => (await deps.realtime.ensure(principal)).chat_prefix;

  // ----- what changes on the chat server --------------------------------------------------------------

  /** After the commit, every ejabberd node forgets its answers about who may reach whom in the org. */
  const flushReach = (tx: Transaction, org: OrgRow) =>
    tx.afterCommit(() => deps.ejabberd.flushOrg(org.chat_key));

  /** A member's identity in the org's calls. */
  const callIdentity = (org: OrgRow, identityKey: string) =>
    `${ORG_IDENTITY_MARKER}${org.chat_key}.${identityKey}`;

  /** After the commit, a member's identity (its key) loses its credential, its sessions and its calls. */
  const revokeMember = (tx: Transaction, prefix: string, org: OrgRow, identityKey: string) =>
    tx.afterCommit(async () => {
      await deps.chat.revokeIdentity(orgNode(prefix, org.chat_key, identityKey));
      await deps.live.endOrgCalls(org.id, callIdentity(org, identityKey));
    });

  /** After the commit, every identity of the org loses its credential and its open sessions. */
  const revokeEveryMember = (tx: Transaction, principal: Principal, org: OrgRow) =>
    tx.afterCommit(async () => {
      const prefix = await prefixOf(principal);
      const keys = await orgsStore(deps.pool).memberIdentityKeys(org.id);
      await deps.chat.revokeIdentities(
        keys.map((key) => orgNode(prefix, org.chat_key, key)),
        orgNodePrefix(prefix, org.chat_key),
      );
      await deps.live.endOrgCalls(org.id);
    });

  /**
   * After any change of the org itself (by POST or PATCH): suspended or chat off, no identity keeps a
   * credential or a session; and every node forgets its answers about the org.
   */
  function orgChanged(tx: Transaction, principal: Principal, org: OrgRow) {
    if (org.status === 'suspended' || !org.chat_enabled) revokeEveryMember(tx, principal, org);
    flushReach(tx, org);
    return org;
  }

  /**
   * Team rooms follow their teams, before the commit: a failure to tell ejabberd (503) undoes the
   * change, so that nobody stays in a room their team left. `none` removes an occupant at once.
   * Removals go first, in a call of their own: a failure part way leaves people in fewer rooms, never
   * in one too many. Two calls however many people, rather than one each. ejabberd changes rooms side
   * by side, so additions that fail in one room may have been made in others (the change is undone
   * here, not there): a member's next change states all their teams again, which puts back what
   * was taken. An addition left there is not found again (it would take asking ejabberd for every
   * team room's members), which is why such writes are charged in full rather than undone by a 402.
   */
  const setAffiliations = async (
    prefix: string,
    org: OrgRow,
    /** `member`: the member's identity key. */
    changes: { team: string; member: string; affiliation: 'member' | 'none' }[],
  ) => {
    const places = (affiliation: 'member' | 'none') =>
      changes
        .filter((change) => change.affiliation === affiliation)
        .map((change) => ({
          room: orgNode(prefix, org.chat_key, change.team),
          jid: jid(orgNode(prefix, org.chat_key, change.member)),
          place: affiliation,
        }));
    await deps.ejabberd.setRoomPlaces(places('none'));
    await deps.ejabberd.setRoomPlaces(places('member'));
  };

  /** The org the path names (the live one, else the latest deleted one), or 404. */
  async function orgOf(db: Db, principal: Principal, externalId: string, lock?: 'update' | 'share') {
    const org = await orgsStore(db).org(principal, externalId, lock);
    if (!org) throw errors.notFound('Org');
    return org;
  }

  /** The org the path names, locked, that may still change here (not a business's or a circle's). */
  async function changeableOrg(tx: Transaction, principal: Principal, externalId: string) {
    const org = await orgOf(tx, principal, externalId, 'update');
    if (org.kind !== 'org') throw userOrg(org.kind);
    if (org.status === 'deleted') throw orgDeleted();
    return org;
  }

  /**
   * 404 unless the member read is still the user's own membership (/v1/me): the app's server may have
   * linked it to another user since it was looked up, giving it a new identity.
   */
  function requireOwner(member: MemberRow, owner: Owner | undefined) {
    if (owner && (member.id !== owner.memberId || member.user_id !== owner.userId))
      throw errors.notFound('Membership');
  }

  /** An org (not deleted) and one of its members (the user's own, when `owner` is given), or 404 / 409 ORG_DELETED. */
  async function memberOf(db: Db, principal: Principal, externalId: string, extId: string, owner?: Owner) {
    const org = await orgOf(db, principal, externalId);
    if (org.status === 'deleted') throw orgDeleted();
    const member = await orgsStore(db).member(org.id, extId);
    if (!member) throw errors.notFound('Member');
    requireOwner(member, owner);
    return { org, member };
  }

  /** Whether the org and the member have chat now. */
  const chatAllowed = (org: OrgRow, member: MemberRow) =>
    org.status === 'active' && org.chat_enabled && member.status === 'active';

  /** 403 with the reason when the org or the member has no chat now. */
  function requireChat(org: OrgRow, member: MemberRow) {
    if (org.status === 'suspended') throw noChat('The org is suspended', 'ORG_SUSPENDED');
    if (!org.chat_enabled) throw noChat('Chat is off for the org', 'ORG_CHAT_OFF');
    if (member.status === 'disabled') throw noChat(`Member ${member.ext_id} is disabled`, 'MEMBER_DISABLED');
  }

  /** Two members who may open a 1:1 now, or the 403 that says why not. */
  async function allowedPair(
    principal: Principal,
    externalId: string,
    extId: string,
    withExtId: string,
    owner?: Owner,
  ) {
    const { org, member } = await memberOf(deps.pool, principal, externalId, extId, owner);
    const peer = await orgsStore(deps.pool).member(org.id, withExtId);
    if (!peer) throw errors.notFound('Member');
    requireChat(org, member);
    const allowed =
      peer.id !== member.id &&
      peer.status === 'active' &&
      policyAllows(
        org.policy,
        member.role,
        peer.role,
        await orgsStore(deps.pool).shareTeam(member.id, peer.id),
      );
    if (!allowed)
      throw noChat(`The org's policy does not let ${extId} open a 1:1 with ${withExtId}`, 'ORG_POLICY');
    return { org, member, peer };
  }

  const presentMembership = (prefix: string, row: MembershipRow) => ({
    id: row.id,
    ext_id: row.ext_id,
    role: row.role,
    title: row.title,
    // The store lists active and disabled memberships only.
    status: row.status as 'active' | 'disabled',
    teams: row.teams,
    jid: jid(orgNode(prefix, row.org_chat_key, row.identity_key)),
    display_name: row.display_name,
    muted: row.muted,
    org: {
      external_id: row.org_external_id,
      kind: row.org_kind,
      name: row.org_name,
      logo_url: row.org_logo_url,
      status: row.org_status as 'active' | 'suspended',
      chat: row.org_chat,
    },
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });

  /** The report's UTC days: `to` (default today) back to `frm` (default 29 days before), at most 366. */
  function usageWindow(query: { frm?: string; to?: string }) {
    const to = query.to ?? utcDay(deps.clock.now());
    const toDate = new Date(`${to}T00:00:00Z`);
    const from = query.frm ?? utcDay(new Date(toDate.getTime() - (DEFAULT_USAGE_WINDOW_DAYS - 1) * DAY_MS));
    const span = (toDate.getTime() - new Date(`${from}T00:00:00Z`).getTime()) / DAY_MS + 1;
    if (span < 1) throw errors.invalidField('query', 'frm', 'must not be after to');
    if (span > MAX_USAGE_WINDOW_DAYS)
      throw errors.invalidField(
        'query',
        'frm',
        `must be at most ${MAX_USAGE_WINDOW_DAYS} days before to, both included`,
      );
    return { from, to };
  }

  const memberPage = (db: Db, orgId: string, limit: number, cursor?: string) =>
    orgsStore(db)
      .members(orgId, limit, deps.cursors.decode(cursor))
      .then((rows) => deps.cursors.page(rows, limit, presentMember));
  const teamPage = (db: Db, orgId: string, limit: number, cursor?: string) =>
    orgsStore(db)
      .teams(orgId, limit, deps.cursors.decode(cursor))
      .then((rows) => deps.cursors.page(rows, limit, presentTeam));

  return {
    /** How many orgs, businesses and circles the app has in a mode (not counting deleted ones). */
    counts: async (scope: AppScope) => {
      const counts = { org: 0, business: 0, circle: 0 };
      for (const row of await orgsStore(deps.pool).countsByKind(scope)) counts[row.kind] = row.count;
      return counts;
    },

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
      // GET /v1/orgs/usage is the usage report: no org may be named so.
      if (input.externalId === 'usage') throw errors.invalidField('body', 'externalId', 'usage is reserved');
      const store = orgsStore(tx);
      await store.lockAppOrgs(principal);
      const now = deps.clock.now();
      const existing = await store.org(principal, input.externalId, 'update');
      if (existing !== null && existing.kind !== 'org') throw userOrg(existing.kind);
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
        return { created: false, org: presentOrg(orgChanged(tx, principal, org)) };
      }
      if (existing && input.replace_deleted !== true) throw orgDeleted();
      if ((await store.liveOrgCount(principal)) >= ORG_LIMITS.orgsPerApp)
        throw limitReached(`An app holds at most ${ORG_LIMITS.orgsPerApp} orgs per key mode`);
      const org = await store.createOrg(principal, {
        id: newId('org'),
        externalId: input.externalId,
        kind: 'org',
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
      const position = deps.cursors.decode(query.cursor);
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
      return presentOrg(
        orgChanged(tx, principal, await orgsStore(tx).updateOrg(org.id, changes, deps.clock.now())),
      );
    },

    deleteOrg: async (principal: Principal, externalId: string, tx: Transaction) => {
      const org = await changeableOrg(tx, principal, externalId);
      await orgsStore(tx).deleteOrg(org.id, deps.clock.now());
      revokeEveryMember(tx, principal, org);
      flushReach(tx, org);
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
      // Linked to another user (or to none), the member becomes a new identity: the next person never
      // takes over the earlier one's address, archive or offline messages.
      const relinked = existing !== null && input.user_id !== undefined && input.user_id !== existing.user_id;
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
            ...(relinked ? { identityKey: newNodeKey() } : {}),
          },
          now,
        );
      } else {
        if (org.member_count >= ORG_LIMITS.membersPerOrg)
          throw orgLimitReached('members', ORG_LIMITS.membersPerOrg);
        memberId = newId('mem');
        await store.createMember(
          {
            id: memberId,
            orgId: org.id,
            extId,
            role: input.role ?? 'member',
            title: input.title ?? null,
            userId: input.user_id ?? null,
            status: input.status ?? 'active',
            identityKey: newNodeKey(),
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
      const member = (await store.member(org.id, extId))!;
      const prefix = await prefixOf(principal);
      const before = existing?.teams ?? [];
      const stays = (team: string, teams: readonly string[]) => teams.includes(team) && !relinked;
      // Removals first: a failure part way leaves the member in fewer rooms, never in one too many.
      // Every team of theirs is stated, not only the new ones (ejabberd skips what it holds already):
      // a membership a change undid there and not here comes back with their next change.
      await setAffiliations(prefix, org, [
        ...before
          .filter((team) => !stays(team, member.teams))
          .map((team) => ({ team, member: existing!.identity_key, affiliation: 'none' as const })),
        ...member.teams.map((team) => ({
          team,
          member: member.identity_key,
          affiliation: 'member' as const,
        })),
      ]);
      // Another person (or nobody) behind the identity now, or no chat for it: its credential goes.
      if (existing && (member.status === 'disabled' || relinked))
        revokeMember(tx, prefix, org, existing.identity_key);
      flushReach(tx, org);
      return { created: existing === null, member: presentMember(member) };
    },

    deleteMember: async (principal: Principal, externalId: string, extId: string, tx: Transaction) => {
      const org = await changeableOrg(tx, principal, externalId);
      const member = await orgsStore(tx).member(org.id, extId);
      if (!member) throw errors.notFound('Member');
      await orgsStore(tx).deleteMember(member.id);
      const prefix = await prefixOf(principal);
      await setAffiliations(
        prefix,
        org,
        member.teams.map((team) => ({ team, member: member.identity_key, affiliation: 'none' as const })),
      );
      revokeMember(tx, prefix, org, member.identity_key);
      flushReach(tx, org);
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
      if (org.team_count >= ORG_LIMITS.teamsPerOrg) throw orgLimitReached('teams', ORG_LIMITS.teamsPerOrg);
      const team = await store.createTeam({ id: newId('team'), orgId: org.id, extId, name }, now);
      // The room first: a team whose room could not be made is not made either (503).
      const settings = await deps.realtime.ensure(principal);
      await deps.ejabberd.ensureRoom(orgNode(settings.chat_prefix, org.chat_key, extId), {
        ...TEAM_ROOM_SHAPE,
        maxUsers: settings.max_room_size,
      });
      return { created: true, team: presentTeam(team) };
    },

    /** Removes a team: its members leave its room at once; the room and its archive stay. */
    deleteTeam: async (principal: Principal, externalId: string, extId: string, tx: Transaction) => {
      const org = await changeableOrg(tx, principal, externalId);
      const store = orgsStore(tx);
      const team = await store.team(org.id, extId);
      if (!team) throw errors.notFound('Team');
      const members = await store.teamMemberIdentityKeys(team.id);
      await store.deleteTeam(team.id);
      const prefix = await prefixOf(principal);
      await setAffiliations(
        prefix,
        org,
        members.map((member) => ({ team: extId, member, affiliation: 'none' as const })),
      );
      // The room stays, empty of members: destroying it would erase its archive (mod_mam clears a
      // destroyed room's). A team made again under the same ext_id gets it back, history included.
      flushReach(tx, org);
      return { ok: true as const, id: extId };
    },

    /** The app's team and inbox rooms, each with its shape (to bring them to a new room size). */
    teamRooms: async (scope: AppScope, chatPrefix: string) =>
      (await orgsStore(deps.pool).teamRooms(scope)).map((room) => ({
        node: orgNode(chatPrefix, room.chat_key, room.ext_id),
        shape: room.inbox ? INBOX_ROOM_SHAPE : TEAM_ROOM_SHAPE,
      })),

    /** Whether a call identity may still be in its org's calls: LiveKit's joins are checked with it. */
    mayCall: async (orgId: string, identity: string) => {
      const store = orgsStore(deps.pool);
      const org = await store.orgById(orgId);
      if (!org) return false;
      const ofOrg = callIdentity(org, '');
      if (!identity.startsWith(ofOrg)) return false;
      const member = await store.memberByIdentityKey(org.id, identity.slice(ofOrg.length));
      if (member === null || !chatAllowed(org, member)) return false;
      return org.kind === 'org' || businessStore(deps.pool).callsOn(org.id);
    },

    // ----- usage -----------------------------------------------------------------------------------

    /** One org's usage by day, product and metric, billed and at list price. */
    orgUsage: async (principal: Principal, externalId: string, query: { frm?: string; to?: string }) => {
      const window = usageWindow(query);
      const org = await orgOf(deps.pool, principal, externalId);
      const usage = await deps.billing.orgUsage(
        principal.accountId,
        principal.mode,
        [org.id],
        window.from,
        window.to,
      );
      return { ...window, org: org.external_id, id: org.id, ...usage.get(org.id)! };
    },

    /** Every org's usage, a page of orgs at a time (newest first). */
    orgsUsage: async (
      principal: Principal,
      query: { frm?: string; to?: string; limit: number; cursor?: string },
    ) => {
      const window = usageWindow(query);
      const position = deps.cursors.decode(query.cursor);
      const rows = await orgsStore(deps.pool).orgs(principal, undefined, query.limit, position);
      const page = deps.cursors.page(rows, query.limit, (row) => row);
      const usage = await deps.billing.orgUsage(
        principal.accountId,
        principal.mode,
        page.items.map((org) => org.id),
        window.from,
        window.to,
      );
      return {
        ...window,
        items: page.items.map((org) => ({ org: org.external_id, id: org.id, ...usage.get(org.id)! })),
        next_cursor: page.next_cursor,
      };
    },

    // ----- identities ------------------------------------------------------------------------------

    /** The org (its id) of a chat key, deleted ones included: usage made before a deletion is its. */
    orgIdOfChatKey: async (chatKey: string) => (await orgsStore(deps.pool).orgByChatKey(chatKey))?.id ?? null,

    /** Who the member may open a 1:1 with (nobody while the org or the member has no chat). */
    directory: async (
      principal: Principal,
      externalId: string,
      extId: string,
      query: { limit: number; cursor?: string },
      owner?: Owner,
    ) => {
      const { org, member } = await memberOf(deps.pool, principal, externalId, extId, owner);
      // A circle's people are listed to its admins and mods only (GET /v1/me/circles/{circle}/members).
      if (org.kind === 'circle' && !['owner', 'admin', 'mod'].includes(member.role))
        throw noChat('Only a circle’s admins and mods list its people', 'CIRCLE_ROLE');
      const position = deps.cursors.decode(query.cursor);
      const rows = chatAllowed(org, member)
        ? await orgsStore(deps.pool).directory(org, member, query.limit, position)
        : [];
      const prefix = await prefixOf(principal);
      return deps.cursors.page(rows, query.limit, (row) => ({
        id: row.id,
        ext_id: row.ext_id,
        role: row.role,
        title: row.title,
        teams: row.teams,
        jid: jid(orgNode(prefix, org.chat_key, row.identity_key)),
      }));
    },

    /**
     * Opens a 1:1 between two members if the policy allows it (403 ORG_POLICY otherwise): nothing to
     * set up on the server, which checks the same policy on every stanza; the answer is the pair's
     * addresses.
     */
    openConversation: async (
      principal: Principal,
      externalId: string,
      input: { member: string; with: string },
      owner?: Owner,
    ) => {
      const { org, member, peer } = await allowedPair(principal, externalId, input.member, input.with, owner);
      const prefix = await prefixOf(principal);
      const present = (row: MemberRow) => ({
        id: row.id,
        ext_id: row.ext_id,
        jid: jid(orgNode(prefix, org.chat_key, row.identity_key)),
      });
      return { member: present(member), with: present(peer) };
    },

    /**
     * A LiveKit token for the member: in a team room of theirs, or a 1:1 the policy allows. The
     * room and identity are the org's own (apart from the app's and the user's personal ones).
     */
    callToken: async (
      principal: Principal,
      externalId: string,
      extId: string,
      input: {
        team?: string;
        with?: string;
        publish?: boolean;
        quality?: 'hd' | 'fhd' | '4k';
        ttl_seconds: number;
      },
      /** The user's own membership (/v1/me): a business identity's call is its user's to ask for. */
      owner?: Owner,
    ) => {
      if ((input.team === undefined) === (input.with === undefined))
        throw errors.invalidField('body', 'team', 'give exactly one of team (a team room) and with (a 1:1)');
      let room: string;
      let org: OrgRow;
      let member: MemberRow;
      if (input.with !== undefined) {
        const pair = await allowedPair(principal, externalId, extId, input.with, owner);
        ({ org, member } = pair);
        // One room per pair, whoever calls: the two identity keys in order. `p+` and `t+` keep pair
        // and team rooms apart (no node holds a `+`).
        room = `p+${[pair.member.identity_key, pair.peer.identity_key].sort().join('~')}`;
      } else {
        ({ org, member } = await memberOf(deps.pool, principal, externalId, extId, owner));
        requireChat(org, member);
        if (!member.teams.includes(input.team!))
          throw noChat(`Member ${extId} is not in team ${input.team}`, 'NOT_IN_TEAM');
        room = `t+${nodeOf(input.team!)}`;
      }
      if (org.kind !== 'org' && !owner) throw userOrg(org.kind);
      if (org.kind !== 'org' && !(await businessStore(deps.pool).callsOn(org.id)))
        throw noChat(`Calls are off for this ${org.kind}`, 'CALLS_OFF');
      const identity = callIdentity(org, member.identity_key);
      const token = await deps.live.mintToken(principal, {
        room: `${ORG_IDENTITY_MARKER}${org.chat_key}.${room}`,
        identity,
        kind: 'call',
        publish: input.publish ?? true,
        quality: input.quality ?? 'hd',
        ttl_seconds: input.ttl_seconds,
        org: org.id,
      });
      return { ...token, identity };
    },

    // ----- the signed-in user's side -------------------------------------------------------------

    myMemberships: async (user: UserPrincipal, query: { limit: number; cursor?: string }) => {
      const position = deps.cursors.decode(query.cursor);
      const rows = await orgsStore(deps.pool).membershipsOf(user, user.userId, query.limit, position);
      const prefix = await prefixOf(user);
      return deps.cursors.page(rows, query.limit, (row) => presentMembership(prefix, row));
    },

    /**
     * The org and ext_id of one of the user's memberships (404 for anyone else's), and the owner that
     * the operation on it checks again as it reads the member.
     */
    myMembership: async (user: UserPrincipal, memberId: string) => {
      const row = await orgsStore(deps.pool).membershipOf(user, user.userId, memberId);
      if (!row) throw errors.notFound('Membership');
      const owner: Owner = { memberId, userId: user.userId };
      return { org: row.org_external_id, extId: row.ext_id, owner };
    },

    changeMyMembership: async (
      user: UserPrincipal,
      memberId: string,
      input: { display_name?: string | null; muted?: boolean },
      tx: Transaction,
    ) => {
      const store = orgsStore(tx);
      // The app's server may link the member to another user meanwhile: the write checks it again.
      const changed =
        (await store.membershipOf(user, user.userId, memberId)) !== null &&
        (await store.setOwnSettings(
          memberId,
          user.userId,
          {
            ...(input.display_name === undefined ? {} : { displayName: input.display_name }),
            ...(input.muted === undefined ? {} : { muted: input.muted }),
          },
          deps.clock.now(),
        ));
      const row = changed ? await store.membershipOf(user, user.userId, memberId) : null;
      if (!row) throw errors.notFound('Membership');
      return presentMembership(await prefixOf(user), row);
    },

    /**
     * A chat credential for a member's org identity. The org and the member are held (share locks)
     * until the credential is written, so a suspension or removal committed meanwhile waits, then
     * revokes it too.
     */
    memberChatToken: (
      principal: Principal,
      externalId: string,
      extId: string,
      input: { name?: string; ttl_seconds: number },
      admit: Admit,
      /** The user's own membership (/v1/me): it must still be theirs once locked. */
      owner?: Owner,
    ) =>
      inTransaction(deps.pool, async (tx) => {
        const org = await orgOf(tx, principal, externalId, 'share');
        // A business identity's credential is its user's own to ask for (/v1/me).
        if (org.kind !== 'org' && !owner) throw userOrg(org.kind);
        if (org.status === 'deleted') throw orgDeleted();
        const member = await orgsStore(tx).member(org.id, extId, 'share');
        if (!member) throw errors.notFound('Member');
        requireOwner(member, owner);
        requireChat(org, member);
        const prefix = await prefixOf(principal);
        const credential = await deps.chat.mintIdentityCredential(
          principal,
          {
            localPart: orgNode(prefix, org.chat_key, member.identity_key),
            nickname: input.name ?? member.display_name ?? extId,
            roomPrefix: orgNodePrefix(prefix, org.chat_key),
            ttlSeconds: input.ttl_seconds,
          },
          admit,
        );
        return { ...credential, member_id: member.id, org: org.external_id };
      }),

    /**
     * ejabberd's question: may one org identity send to another (mod_svc_scope asks once a minute per
     * pair, and forgets on any change of the org)? Both active members of the same active org with
     * chat on, and the policy allows the pair.
     */
    mayReach: async (from: string, to: string): Promise<boolean> => {
      const [sender, recipient] = [parseOrgNode(from), parseOrgNode(to)];
      if (!sender || !recipient || sender.prefix !== recipient.prefix || sender.chatKey !== recipient.chatKey)
        return false;
      const store = orgsStore(deps.pool);
      const org = await store.orgByChatKey(sender.chatKey);
      if (!org) return false;
      const [a, b] = await Promise.all([
        store.memberByIdentityKey(org.id, sender.name),
        store.memberByIdentityKey(org.id, recipient.name),
      ]);
      if (!a || !b || !chatAllowed(org, a) || !chatAllowed(org, b)) return false;
      return policyAllows(org.policy, a.role, b.role, await store.shareTeam(a.id, b.id));
    },

    // ----- for the businesses (businesses.ts): what their changes do on the chat server -------------

    /** After the commit, a member identity loses its credential, its sessions and its calls. */
    identityRevoked: async (tx: Transaction, principal: Principal, org: OrgRow, identityKey: string) =>
      revokeMember(tx, await prefixOf(principal), org, identityKey),
    /** After the commit, every identity of the org loses its credential, sessions and calls. */
    everyIdentityRevoked: revokeEveryMember,
    /** After the commit, every ejabberd node forgets its answers about the org. */
    reachChanged: flushReach,
    /** After the commit, the org's calls end (its calls were turned off). */
    callsEnded: (tx: Transaction, org: OrgRow) => tx.afterCommit(() => deps.live.endOrgCalls(org.id)),
    /** Whether the org (a business) has chat now, with the member: their identity may be used. */
    chatAllowed,
  };
}

export type OrgsService = ReturnType<typeof createOrgsService>;
