import type { DatabasePool } from 'slonik';
import type { Bookmark, EjabberdClient, RoomPlace, RoomShape } from '../../adapters/ejabberd.js';
import type { AppScope, Principal, UserPrincipal } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors, ServiceError } from '../../platform/errors.js';
import { orgNode, orgNodePrefix, parseOrgNode } from '../../platform/identities.js';
import { newId } from '../../platform/ids.js';
import type { Db, Transaction } from '../../platform/transaction.js';
import type { RealtimeService } from '../realtime/service.js';
import type { SocialService } from '../social/service.js';
import { businessStore } from './business-store.js';
import type { BusinessesService } from './businesses.js';
import {
  ANNOUNCEMENTS,
  CIRCLE_LIMITS,
  type CIRCLE_MEMBER_STATUSES,
  type CircleRole,
  type CircleSettingsRow,
  GENERAL,
  type RoomRow,
} from './circle-schema.js';
import { type CircleRow, circleStore, type MemberFilter } from './circle-store.js';
import { newChatKey, newNodeKey } from './keys.js';
import type { MemberRow } from './schema.js';
import type { OrgsService } from './service.js';
import { orgsStore } from './store.js';

const iso = (date: Date) => date.toISOString();

/** A circle's rooms: <prefix>.+<org key>.r+<room key>; `+` never appears in another org node. */
const ROOM_MARKER = 'r+';
const CIRCLE_ROOM_NODE = /^([a-z0-9]+)\.\+([a-z0-9]{12})\.r\+([a-z0-9]{10})(?:\/(.*))?$/s;
/** A member's name in rooms when they have no name. */
const DEFAULT_NAME = 'Member';
/** How many characters of an identity's key tag its nickname. */
const NICK_TAG = 6;
/**
 * A member's nickname in the circle's rooms: their name and a tag of their identity, so that two
 * members of one name both enter, and none enters under another's (mod_svc_scope asks).
 */
export const circleNick = (name: string | null, identityKey: string) =>
  `${name ?? DEFAULT_NAME} #${identityKey.slice(0, NICK_TAG)}`;

const refused = (message: string, code: string) => new ServiceError('permission_error', message, { code });
const conflict = (message: string, code: string) => new ServiceError('conflict', message, { code });
const circleNotFound = () => errors.notFound('Circle');
const memberNotFound = () => errors.notFound('Member');
const roomNotFound = () => errors.notFound('Room');
const archived = () => conflict('This room is archived: it takes no change and no one new', 'ROOM_ARCHIVED');

/** Who may do what (docs/circles.md, "Roles"). */
const RANK: Record<CircleRole, number> = { member: 0, mod: 1, admin: 2, owner: 3 };
const WHO: Record<CircleRole, string> = {
  member: 'members',
  mod: 'admins and mods',
  admin: 'owner and admins',
  owner: 'owner',
};
const needRole = (role: CircleRole, least: CircleRole, what: string) => {
  if (RANK[role] < RANK[least]) throw refused(`Only the circle’s ${WHO[least]} may ${what}`, 'CIRCLE_ROLE');
};

/**
 * Mods may change any room or board; a member, the rooms they made. Not the boards they made as a
 * mod: boards are the mods' whatever their maker's role is now.
 */
const needRoomRole = (
  circle: { my_role: CircleRole; my_member_id: string },
  room: { kind: string; created_by: string | null },
  what: string,
) => {
  if (room.kind !== 'room' || room.created_by !== circle.my_member_id) needRole(circle.my_role, 'mod', what);
};

/** A circle member's status besides active (a circle's people have no other). */
type CircleStatus = 'requested' | 'rejected' | 'invited' | 'blocked' | 'removed';

/** How a circle's room is made on the chat server, besides its size. */
const roomShape = (room: { kind: string; name: string; open: boolean }): RoomShape => ({
  membersOnly: !room.open,
  title: room.name,
  showJids: true,
  ...(room.kind === 'board' ? { presenceOf: ['moderator'] as const } : {}),
});

/** A board holds every member: a board's write naming open or auto_join is refused (422). */
const refuseBoardMembership = (input: { open?: boolean; auto_join?: boolean }) => {
  if (input.open !== undefined || input.auto_join !== undefined)
    throw errors.invalidField(
      'body',
      input.open !== undefined ? 'open' : 'auto_join',
      'a board holds every member: it is neither opened nor closed, nor joined',
    );
};

type MyCircle = CircleRow & { my_role: CircleRole; my_member_id: string };

export function createCirclesService(deps: {
  pool: DatabasePool;
  clock: Clock;
  cursors: Cursors;
  orgs: OrgsService;
  businesses: BusinessesService;
  realtime: RealtimeService;
  social: SocialService;
  ejabberd: EjabberdClient;
  chatDomain: string;
  mucDomain: string;
}) {
  const roomJid = (node: string) => `${node}@${deps.mucDomain}`;
  const settingsOf = (principal: Principal) => deps.realtime.ensure(principal);
  const prefixOf = async (principal: Principal) => (await settingsOf(principal)).chat_prefix;

  // ----- names on the chat server ------------------------------------------------------------------

  const roomNode = (prefix: string, circle: { chat_key: string }, roomKey: string) =>
    `${orgNodePrefix(prefix, circle.chat_key)}${ROOM_MARKER}${roomKey}`;
  const identityNode = (prefix: string, circle: { chat_key: string }, identityKey: string) =>
    orgNode(prefix, circle.chat_key, identityKey);
  const identityJid = (prefix: string, circle: { chat_key: string }, identityKey: string) =>
    `${identityNode(prefix, circle, identityKey)}@${deps.chatDomain}`;

  /**
   * An identity's bookmarks: every board that is not archived (a board among its rooms is muted: not
   * joined on login) and its rooms that are not.
   */
  const bookmarksOf = (
    prefix: string,
    circle: CircleRow,
    rooms: readonly RoomRow[],
    roomIds: ReadonlySet<string>,
    member: { display_name: string | null; identity_key: string },
  ): Bookmark[] =>
    rooms
      .filter((room) => room.archived_at === null && (room.kind === 'board' || roomIds.has(room.id)))
      .map((room) => ({
        jid: roomJid(roomNode(prefix, circle, room.room_key)),
        name: room.name,
        nick: circleNick(member.display_name, member.identity_key),
        autojoin: !(room.kind === 'board' && roomIds.has(room.id)),
      }));

  /**
   * Bookmarks, replaced whole for the members named (all active members without a list), a thousand
   * members per call.
   */
  async function syncBookmarks(db: Db, prefix: string, circle: CircleRow, memberIds?: readonly string[]) {
    const store = circleStore(db);
    const rooms = await store.rooms(circle.id);
    await deps.ejabberd.setManyBookmarks(
      (await store.bookmarkPlaces(circle.id, memberIds)).map((member) => ({
        user: identityNode(prefix, circle, member.identity_key),
        rooms: bookmarksOf(prefix, circle, rooms, new Set(member.room_ids), member),
      })),
    );
  }

  /**
   * One member's place in some of the circle's rooms, in one call before the commit (a failure undoes
   * the change, 503): `placeIn` answers their place in each room, or null to leave it as it is.
   */
  async function placeMember(
    tx: Transaction,
    prefix: string,
    circle: CircleRow,
    member: Pick<MemberRow, 'id' | 'identity_key'>,
    placeIn: (room: RoomRow, isIn: boolean) => RoomPlace['place'] | null,
  ) {
    const store = circleStore(tx);
    const mine = new Set((await store.placesOf(member.id)).map((row) => row.room_id));
    const jid = identityJid(prefix, circle, member.identity_key);
    await deps.ejabberd.setRoomPlaces(
      (await store.rooms(circle.id)).flatMap((room) => {
        const place = placeIn(room, mine.has(room.id));
        return place === null ? [] : [{ room: roomNode(prefix, circle, room.room_key), jid, place }];
      }),
    );
  }

  /** A room on the chat server: open rooms and boards take any of the circle's identities. */
  const ensureRoom = async (principal: Principal, circle: CircleRow, room: RoomRow) => {
    const settings = await settingsOf(principal);
    await deps.ejabberd.ensureRoom(roomNode(settings.chat_prefix, circle, room.room_key), {
      ...roomShape(room),
      maxUsers: settings.max_room_size,
    });
  };

  // ----- lookups -----------------------------------------------------------------------------------

  /**
   * The circle the path names, with the caller's place: 404 if they are not an active member, 403
   * when their role is below `least` (`what` says what they tried).
   */
  async function circleFor(
    db: Db,
    user: UserPrincipal,
    orgId: string,
    least: CircleRole,
    what: string,
    lock?: 'update' | 'key share',
  ): Promise<MyCircle> {
    const circle = await circleStore(db).circle(user, orgId, user.userId, lock);
    if (!circle || circle.status === 'deleted' || circle.my_role === null) throw circleNotFound();
    needRole(circle.my_role, least, what);
    return circle as MyCircle;
  }

  async function memberOf(db: Db, circle: CircleRow, memberId: string, lock?: 'update') {
    const member = await circleStore(db).member(circle.id, memberId, lock);
    if (!member) throw memberNotFound();
    return member;
  }

  async function roomOf(db: Db, circle: CircleRow, roomId: string, lock?: 'update') {
    const room = await circleStore(db).room(circle.id, roomId, lock);
    if (!room) throw roomNotFound();
    return room;
  }

  /**
   * 409 when the circle holds more people than a circle may, this transaction's included. Taken last:
   * changes of a circle's people wait for each other only from here to their commit.
   */
  async function withinSize(tx: Transaction, circle: CircleRow) {
    if ((await circleStore(tx).peopleCountToCommit(circle.id)) > CIRCLE_LIMITS.membersPerCircle)
      throw conflict(`A circle holds at most ${CIRCLE_LIMITS.membersPerCircle} people`, 'LIMIT_REACHED');
  }

  /** Whether a person with this row (or none) takes a new place in the circle's count. */
  const counted = (existing: MemberRow | null) =>
    existing === null || existing.status === 'removed' || existing.status === 'rejected';

  /** 409 when the user owns as many circles as a user may; holds their count until the commit. */
  async function mayOwnAnother(tx: Transaction, scope: Principal, userId: string) {
    await businessStore(tx).lockOwner(scope, userId);
    if ((await businessStore(tx).ownedCount(scope, userId, 'circle')) >= CIRCLE_LIMITS.circlesPerOwner)
      throw conflict(`A user owns at most ${CIRCLE_LIMITS.circlesPerOwner} circles`, 'LIMIT_REACHED');
  }

  /** A person invited or asking, with an identity of their own, or a removed or turned-down one back. */
  async function addPerson(
    tx: Transaction,
    circle: CircleRow,
    userId: string,
    place: { role: CircleRole; status: 'invited' | 'requested' },
    existing: MemberRow | null,
  ) {
    const id = existing?.id ?? newId('mem');
    if (existing) await circleStore(tx).setPlace(id, place, deps.clock.now());
    else
      await orgsStore(tx).createMember(
        { id, orgId: circle.id, extId: id, userId, title: null, ...place, identityKey: newNodeKey() },
        deps.clock.now(),
      );
    if (counted(existing)) await withinSize(tx, circle);
    return id;
  }

  /**
   * Someone becomes (or is again) an active member, a new person (`userId`) or one with a row. The
   * chat server first: the closed auto-join rooms take them, a restore lifts their bans in every room,
   * their bookmarks list the boards and their rooms. Then the rows, so that joins of one circle do not
   * queue behind each other's server calls: theirs (a new one: an identity of their own), the
   * auto-join rooms, their profile's name if they have none here. Answers their member id.
   */
  async function activate(
    tx: Transaction,
    principal: Principal,
    circle: CircleRow,
    who: { existing: MemberRow } | { userId: string },
    options: { role?: CircleRole; restoring?: boolean } = {},
  ) {
    const store = circleStore(tx);
    const existing = 'existing' in who ? who.existing : null;
    const person = existing ?? {
      id: newId('mem'),
      identity_key: newNodeKey(),
      user_id: (who as { userId: string }).userId,
      display_name: null,
    };
    const rooms = await store.rooms(circle.id);
    const autoJoin = rooms.filter(
      (room) => room.kind === 'room' && room.auto_join && room.archived_at === null,
    );
    const placesBefore = existing ? await store.placesOf(existing.id) : [];
    const roomIds = new Set([...placesBefore.map((row) => row.room_id), ...autoJoin.map((room) => room.id)]);
    const name = person.display_name ?? (await deps.social.displayNameOf(principal, person.user_id!, tx));

    const prefix = await prefixOf(principal);
    const jid = identityJid(prefix, circle, person.identity_key);
    await deps.ejabberd.setRoomPlaces(
      rooms.flatMap((room) => {
        const place = !room.open && roomIds.has(room.id) ? 'member' : options.restoring ? 'none' : null;
        return place === null ? [] : [{ room: roomNode(prefix, circle, room.room_key), jid, place }];
      }),
    );
    await deps.ejabberd.setBookmarks(
      identityNode(prefix, circle, person.identity_key),
      bookmarksOf(prefix, circle, rooms, roomIds, { display_name: name, identity_key: person.identity_key }),
    );

    const now = deps.clock.now();
    const place = { status: 'active' as const, ...(options.role ? { role: options.role } : {}) };
    if (existing) await store.setPlace(existing.id, place, now);
    else
      await orgsStore(tx).createMember(
        {
          id: person.id,
          orgId: circle.id,
          extId: person.id,
          userId: person.user_id,
          title: null,
          role: 'member',
          ...place,
          identityKey: person.identity_key,
        },
        now,
      );
    for (const room of autoJoin) await store.joinRoom(room.id, [person.id], now);
    if (name !== person.display_name)
      await orgsStore(tx).setOwnSettings(person.id, person.user_id!, { displayName: name }, now);
    if (counted(existing)) await withinSize(tx, circle);
    deps.orgs.reachChanged(tx, circle);
    return person.id;
  }

  /**
   * Someone out of the circle (removed, left or blocked): out of every room (banned from each when
   * blocked), no bookmarks, their identity's credential and sessions gone after the commit.
   */
  async function takeOut(
    tx: Transaction,
    principal: Principal,
    circle: CircleRow,
    member: MemberRow,
    status: 'removed' | 'blocked',
  ) {
    const store = circleStore(tx);
    const prefix = await prefixOf(principal);
    await placeMember(tx, prefix, circle, member, () => (status === 'blocked' ? 'outcast' : 'none'));
    await store.leaveEveryRoom(circle.id, member.id);
    await store.setPlace(
      member.id,
      { status, ...(status === 'removed' ? { role: 'member' } : {}) },
      deps.clock.now(),
    );
    if (member.status === 'active') {
      await deps.ejabberd.setBookmarks(identityNode(prefix, circle, member.identity_key), []);
      await deps.orgs.identityRevoked(tx, principal, circle, member.identity_key);
    }
    deps.orgs.reachChanged(tx, circle);
  }

  // ----- what callers see --------------------------------------------------------------------------

  const presentCircle = (row: MyCircle) => ({
    id: row.id,
    name: row.name,
    code: row.code!,
    join_rule: row.join_rule,
    members_create_rooms: row.members_create_rooms,
    calls: row.calls,
    member_count: row.active_count,
    my_role: row.my_role,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });

  const presentRoom = (prefix: string, circle: CircleRow, row: RoomRow) => ({
    id: row.id,
    kind: row.kind,
    name: row.name,
    jid: roomJid(roomNode(prefix, circle, row.room_key)),
    open: row.open,
    auto_join: row.auto_join,
    archived: row.archived_at !== null,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });

  const presentMember = (row: MemberRow) => ({
    id: row.id,
    user_id: row.user_id!,
    role: row.role as CircleRole,
    status: row.status as (typeof CIRCLE_MEMBER_STATUSES)[number],
    display_name: row.display_name,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });

  async function presentWithRooms(db: Db, user: UserPrincipal, circle: MyCircle) {
    const store = circleStore(db);
    const prefix = await prefixOf(user);
    const live = (await store.rooms(circle.id)).filter((room) => room.archived_at === null);
    const mine = new Map((await store.placesOf(circle.my_member_id)).map((row) => [row.room_id, row]));
    const boards = live.filter((room) => room.kind === 'board');
    return {
      ...presentCircle(circle),
      boards: boards.map((room) => presentRoom(prefix, circle, room)),
      // A closed room is listed to its members, and to the mods who run the rooms.
      rooms: live
        .filter(
          (room) =>
            room.kind === 'room' && (room.open || mine.has(room.id) || RANK[circle.my_role] >= RANK.mod),
        )
        .map((room) => presentRoom(prefix, circle, room)),
      me: {
        member_id: circle.my_member_id,
        role: circle.my_role,
        muted_boards: boards.filter((room) => mine.has(room.id)).map((room) => room.id),
        joined_rooms: live.filter((room) => room.kind === 'room' && mine.has(room.id)).map((room) => room.id),
      },
    };
  }

  /** The circle a code names when it names one (of this app, not deleted). */
  async function circleOfCode(db: Db, user: UserPrincipal, code: string, lock?: 'key share') {
    const row = await businessStore(db).code(user, code.toUpperCase());
    if (row?.org_id === null || row === null) return null;
    const circle = await circleStore(db).circle(user, row.org_id, user.userId, lock);
    return circle?.status === 'active' ? circle : null;
  }

  /** A room of the circle that still takes changes. */
  async function liveRoomOf(tx: Transaction, circle: CircleRow, roomId: string) {
    const room = await roomOf(tx, circle, roomId, 'update');
    if (room.archived_at !== null) throw archived();
    return room;
  }

  return {
    // ----- codes and invites: a circle's, else a business's or a member's ----------------------------

    lookupCode: async (user: UserPrincipal, code: string) => {
      const circle = await circleOfCode(deps.pool, user, code);
      if (!circle) return deps.businesses.lookupCode(user, code);
      const me = await circleStore(deps.pool).memberOfUser(circle.id, user.userId);
      const myStatus: 'none' | 'member' | CircleStatus =
        me === null ? 'none' : me.status === 'active' ? 'member' : (me.status as CircleStatus);
      return {
        code: circle.code!,
        kind: 'circle' as const,
        name: circle.name,
        may_message: false,
        reason: 'circle' as const,
        business: null,
        circle: {
          id: circle.id,
          join_rule: circle.join_rule,
          member_count: circle.active_count,
          my_status: myStatus,
        },
      };
    },

    startChat: async (user: UserPrincipal, code: string, input: { name?: string }, tx: Transaction) => {
      if (await circleOfCode(tx, user, code))
        throw conflict('This is a circle’s code: join it (POST /v1/me/codes/{code}/join)', 'CIRCLE_CODE');
      return deps.businesses.startChat(user, code, input, tx);
    },

    /** Joins a circle by its rule (open, approval, invite), or asks to join a business's team. */
    joinByCode: async (user: UserPrincipal, code: string, tx: Transaction) => {
      const circle = await circleOfCode(tx, user, code, 'key share');
      if (!circle) return deps.businesses.joinByCode(user, code, tx);
      const answer = (status: 'member' | 'requested', memberId: string) => ({
        status,
        kind: 'circle' as const,
        org_id: circle.id,
        member_id: memberId,
      });
      const existing = await circleStore(tx).memberOfUser(circle.id, user.userId, 'update');
      switch (existing?.status) {
        case 'active':
          return answer('member', existing.id);
        case 'requested':
          // Asked while the circle took requests; it may have opened since.
          if (circle.join_rule !== 'open') return answer('requested', existing.id);
          break;
        case 'blocked':
          throw refused('You are blocked in this circle until its admins restore you', 'CIRCLE_BLOCKED');
        case 'invited':
          // Invited and joining: that is an accept.
          return answer('member', await activate(tx, user, circle, { existing }));
      }
      if (circle.join_rule === 'invite')
        throw refused('This circle takes only the people its admins invite', 'CIRCLE_INVITE_ONLY');
      if (circle.join_rule === 'approval' && existing?.status !== 'requested') {
        const asked = await addPerson(
          tx,
          circle,
          user.userId,
          { role: 'member', status: 'requested' },
          existing,
        );
        return answer('requested', asked);
      }
      // Back as a member, whatever role they had.
      const who = existing ? { existing } : { userId: user.userId };
      return answer('member', await activate(tx, user, circle, who, { role: 'member' }));
    },

    acceptInvite: async (user: UserPrincipal, inviteId: string, tx: Transaction) => {
      const invite = await businessStore(tx).inviteOf(user, user.userId, inviteId);
      if (invite?.kind !== 'circle') return deps.businesses.acceptInvite(user, inviteId, tx);
      const circle = (await circleStore(tx).circle(user, invite.org_id, user.userId, 'key share'))!;
      await activate(tx, user, circle, {
        existing: (await circleStore(tx).member(circle.id, invite.id, 'update'))!,
      });
      return { id: invite.id, status: 'accepted' as const, member_id: invite.id };
    },

    declineInvite: async (user: UserPrincipal, inviteId: string, tx: Transaction) => {
      const invite = await businessStore(tx).inviteOf(user, user.userId, inviteId);
      if (invite?.kind !== 'circle') return deps.businesses.declineInvite(user, inviteId, tx);
      // Their row stays, as a removed member's: inviting them again is a new invite.
      await circleStore(tx).setPlace(invite.id, { status: 'removed', role: 'member' }, deps.clock.now());
      return { id: invite.id, status: 'declined' as const, member_id: null };
    },

    // ----- circles -----------------------------------------------------------------------------------

    /** A circle with its code, an Announcements board and a General room; the creator its owner. */
    create: async (
      user: UserPrincipal,
      input: {
        name: string;
        join_rule?: CircleSettingsRow['join_rule'];
        members_create_rooms?: boolean;
        calls?: boolean;
      },
      tx: Transaction,
    ) => {
      await mayOwnAnother(tx, user, user.userId);
      const now = deps.clock.now();
      const id = newId('org');
      await orgsStore(tx).createOrg(user, {
        id,
        externalId: id,
        kind: 'circle',
        chatKey: newChatKey(),
        name: input.name,
        logoUrl: null,
        policy: 'anyone',
        chatEnabled: true,
        at: now,
      });
      const store = circleStore(tx);
      await store.createCircle({
        org_id: id,
        join_rule: input.join_rule ?? 'approval',
        members_create_rooms: input.members_create_rooms ?? false,
        calls: input.calls ?? true,
      });
      await deps.businesses.newOrgCode(tx, user, id);
      const circle = (await store.circle(user, id, user.userId))!;
      const rooms = [];
      for (const [kind, name] of [
        ['board', ANNOUNCEMENTS],
        ['room', GENERAL],
      ] as const) {
        const room = await store.createRoom({
          id: newId('room'),
          org_id: id,
          kind,
          room_key: newNodeKey(),
          name,
          open: true,
          auto_join: true,
          created_by: null,
          created_at: now,
        });
        await ensureRoom(user, circle, room);
        rooms.push(room);
      }
      const ownerId = await activate(tx, user, circle, { userId: user.userId }, { role: 'owner' });
      for (const room of rooms) await store.setRoomCreator(room.id, ownerId);
      return presentWithRooms(tx, user, await circleFor(tx, user, id, 'owner', 'start it'));
    },

    listMine: async (user: UserPrincipal, query: { limit: number; cursor?: string }) =>
      deps.cursors.page(
        await circleStore(deps.pool).circlesOf(
          user,
          user.userId,
          query.limit,
          deps.cursors.decode(query.cursor),
        ),
        query.limit,
        (row) => presentCircle(row as MyCircle),
      ),

    get: async (user: UserPrincipal, orgId: string) =>
      presentWithRooms(deps.pool, user, await circleFor(deps.pool, user, orgId, 'member', 'see it')),

    change: async (
      user: UserPrincipal,
      orgId: string,
      input: {
        name?: string;
        join_rule?: CircleSettingsRow['join_rule'];
        members_create_rooms?: boolean;
        calls?: boolean;
      },
      tx: Transaction,
    ) => {
      const circle = await circleFor(tx, user, orgId, 'admin', 'change it', 'update');
      const org = await orgsStore(tx).updateOrg(
        circle.id,
        input.name === undefined ? {} : { name: input.name },
        deps.clock.now(),
      );
      await circleStore(tx).updateCircle(circle.id, {
        ...(input.join_rule === undefined ? {} : { joinRule: input.join_rule }),
        ...(input.members_create_rooms === undefined
          ? {}
          : { membersCreateRooms: input.members_create_rooms }),
        ...(input.calls === undefined ? {} : { calls: input.calls }),
      });
      if (input.calls === false) deps.orgs.callsEnded(tx, org);
      return presentCircle(await circleFor(tx, user, circle.id, 'admin', 'change it'));
    },

    /** Deletes the circle: every identity locked, its rooms and their history kept. */
    delete: async (user: UserPrincipal, orgId: string, tx: Transaction) => {
      const circle = await circleFor(tx, user, orgId, 'owner', 'delete it', 'update');
      const org = await orgsStore(tx).deleteOrg(circle.id, deps.clock.now());
      await businessStore(tx).deleteCodeOfOrg(circle.id);
      deps.orgs.everyIdentityRevoked(tx, user, org);
      deps.orgs.reachChanged(tx, org);
      return { ok: true as const, id: circle.id };
    },

    leave: async (user: UserPrincipal, orgId: string, tx: Transaction) => {
      const circle = await circleFor(tx, user, orgId, 'member', 'leave it', 'key share');
      if (circle.my_role === 'owner')
        throw conflict(
          'The owner cannot leave: hand the circle over first (PATCH …/members/{member_id} {"role": "owner"})',
          'OWNER_STAYS',
        );
      const me = await memberOf(tx, circle, circle.my_member_id, 'update');
      // Read again under its lock: a block that committed meanwhile must not turn into a removal,
      // which lifts the bans and lets them join again.
      if (me.status !== 'active') throw circleNotFound();
      await takeOut(tx, user, circle, me, 'removed');
      return { ok: true as const, id: circle.id };
    },

    // ----- members -----------------------------------------------------------------------------------

    members: async (
      user: UserPrincipal,
      orgId: string,
      query: { q?: string; status?: MemberFilter; limit: number; cursor?: string },
    ) => {
      const circle = await circleFor(deps.pool, user, orgId, 'mod', 'list its people');
      return deps.cursors.page(
        await circleStore(deps.pool).members(
          circle.id,
          query.status ?? 'active',
          query.q,
          query.limit,
          deps.cursors.decode(query.cursor),
        ),
        query.limit,
        presentMember,
      );
    },

    /** Invites someone by personal code or phone; inviting someone who asked lets them in. */
    invite: async (
      user: UserPrincipal,
      orgId: string,
      input: { code?: string; phone?: string; role?: 'admin' | 'mod' | 'member' },
      tx: Transaction,
    ) => {
      const circle = await circleFor(tx, user, orgId, 'admin', 'invite people', 'update');
      const role = input.role ?? 'member';
      if (role === 'admin') needRole(circle.my_role, 'owner', 'invite admins');
      const userId = await deps.businesses.personBy(tx, user, input);
      const store = circleStore(tx);
      const existing = await store.memberOfUser(circle.id, userId, 'update');
      if (existing?.status === 'active' || existing?.status === 'invited')
        throw conflict('This person is in the circle or invited already', 'ALREADY_MEMBER');
      if (existing?.status === 'blocked')
        throw conflict('This person is blocked: restore them instead', 'MEMBER_BLOCKED');
      if (existing?.status === 'requested') {
        await activate(tx, user, circle, { existing }, { role });
        return presentMember((await store.member(circle.id, existing.id))!);
      }
      const id = await addPerson(tx, circle, userId, { role, status: 'invited' }, existing);
      return presentMember((await store.member(circle.id, id))!);
    },

    approve: async (user: UserPrincipal, orgId: string, requestId: string, tx: Transaction) => {
      const circle = await circleFor(tx, user, orgId, 'admin', 'approve join requests', 'update');
      const request = await memberOf(tx, circle, requestId, 'update');
      if (request.status !== 'requested') throw errors.notFound('Join request');
      await activate(tx, user, circle, { existing: request });
      return presentMember((await circleStore(tx).member(circle.id, request.id))!);
    },

    reject: async (user: UserPrincipal, orgId: string, requestId: string, tx: Transaction) => {
      const circle = await circleFor(tx, user, orgId, 'admin', 'turn join requests down', 'update');
      const request = await memberOf(tx, circle, requestId, 'update');
      if (request.status !== 'requested') throw errors.notFound('Join request');
      await circleStore(tx).setPlace(request.id, { status: 'rejected' }, deps.clock.now());
      return presentMember((await circleStore(tx).member(circle.id, request.id))!);
    },

    /** A role (admin, mod, member; owner hands the circle over), a block or a restore. */
    changeMember: async (
      user: UserPrincipal,
      orgId: string,
      memberId: string,
      input: { role?: CircleRole; status?: 'active' | 'blocked' },
      tx: Transaction,
    ) => {
      const circle = await circleFor(tx, user, orgId, 'admin', 'change its people', 'update');
      if (input.role !== undefined && input.status !== undefined)
        throw errors.invalidField('body', 'status', 'change a role or a status, not both at once');
      const member = await memberOf(tx, circle, memberId, 'update');
      const theirs = member.role as CircleRole;
      if (theirs === 'owner')
        throw conflict(
          'The owner is neither blocked nor given another role: they hand the circle over',
          'OWNER_STAYS',
        );
      // Admins manage mods and members; only the owner manages admins.
      if (theirs === 'admin') needRole(circle.my_role, 'owner', 'change an admin');
      if (input.role === 'admin' || input.role === 'owner')
        needRole(circle.my_role, 'owner', `make someone ${input.role}`);
      const now = deps.clock.now();
      const store = circleStore(tx);
      if (input.role !== undefined) {
        if (member.status !== 'active') throw conflict('Only an active member is given a role', 'NOT_ACTIVE');
        if (input.role === 'owner') {
          await mayOwnAnother(tx, user, member.user_id!);
          await store.setPlace(circle.my_member_id, { role: 'admin' }, now);
        }
        await store.setPlace(member.id, { role: input.role }, now);
        // Who posts on boards is ejabberd's question: it forgets its answers.
        deps.orgs.reachChanged(tx, circle);
      } else if (input.status === 'blocked' && member.status !== 'blocked') {
        // An invite is cancelled and a request rejected instead: a restore makes an active member again.
        if (member.status !== 'active') throw conflict('Only an active member is blocked', 'NOT_ACTIVE');
        await takeOut(tx, user, circle, member, 'blocked');
      } else if (input.status === 'active' && member.status === 'blocked') {
        await activate(tx, user, circle, { existing: member }, { restoring: true });
      } else if (input.status === 'active' && member.status !== 'active') {
        throw conflict('Only a blocked member is restored', 'NOT_BLOCKED');
      }
      return presentMember((await store.member(circle.id, member.id))!);
    },

    /** Removes someone (they may rejoin by the circle's rule), or cancels an invite. */
    removeMember: async (user: UserPrincipal, orgId: string, memberId: string, tx: Transaction) => {
      const circle = await circleFor(tx, user, orgId, 'admin', 'remove people', 'update');
      const member = await memberOf(tx, circle, memberId, 'update');
      if (member.role === 'owner')
        throw conflict('The owner cannot be removed: they hand the circle over first', 'OWNER_STAYS');
      if (member.role === 'admin') needRole(circle.my_role, 'owner', 'remove an admin');
      if (member.status === 'blocked')
        throw conflict(
          'A blocked member is restored before being removed (removed may rejoin)',
          'MEMBER_BLOCKED',
        );
      if (member.status !== 'removed') await takeOut(tx, user, circle, member, 'removed');
      return { ok: true as const, id: member.id };
    },

    // ----- rooms and boards --------------------------------------------------------------------------

    createRoom: async (
      user: UserPrincipal,
      orgId: string,
      input: { kind: RoomRow['kind']; name: string; open?: boolean; auto_join?: boolean },
      tx: Transaction,
    ) => {
      const circle = await circleFor(tx, user, orgId, 'member', 'create rooms', 'update');
      if (input.kind === 'board') needRole(circle.my_role, 'mod', 'create boards');
      else if (!circle.members_create_rooms) needRole(circle.my_role, 'mod', 'create rooms');
      if (input.kind === 'board') refuseBoardMembership(input);
      const store = circleStore(tx);
      if ((await store.roomCount(circle.id)) >= CIRCLE_LIMITS.roomsPerCircle)
        throw conflict(
          `A circle holds at most ${CIRCLE_LIMITS.roomsPerCircle} rooms and boards, archived ones included`,
          'LIMIT_REACHED',
        );
      const now = deps.clock.now();
      const room = await store.createRoom({
        id: newId('room'),
        org_id: circle.id,
        kind: input.kind,
        room_key: newNodeKey(),
        name: input.name,
        open: input.kind === 'board' || (input.open ?? true),
        auto_join: input.kind === 'board' || (input.auto_join ?? false),
        created_by: circle.my_member_id,
        created_at: now,
      });
      await ensureRoom(user, circle, room);
      const prefix = await prefixOf(user);
      if (room.kind === 'board') {
        // Every member is on every board: everyone's bookmarks list it.
        await syncBookmarks(tx, prefix, circle);
      } else {
        await store.joinRoom(room.id, [circle.my_member_id], now);
        const me = (await store.member(circle.id, circle.my_member_id))!;
        if (!room.open)
          await placeMember(tx, prefix, circle, me, (each) => (each.id === room.id ? 'member' : null));
        await syncBookmarks(tx, prefix, circle, [me.id]);
      }
      return presentRoom(prefix, circle, room);
    },

    /** Renames, opens or closes a room, or makes new members join it (admins, mods, its creator). */
    changeRoom: async (
      user: UserPrincipal,
      orgId: string,
      roomId: string,
      input: { name?: string; open?: boolean; auto_join?: boolean },
      tx: Transaction,
    ) => {
      const circle = await circleFor(tx, user, orgId, 'member', 'change rooms', 'update');
      const room = await liveRoomOf(tx, circle, roomId);
      needRoomRole(circle, room, 'change rooms');
      if (room.kind === 'board') refuseBoardMembership(input);
      const store = circleStore(tx);
      const after = await store.updateRoom(
        room.id,
        {
          ...(input.name === undefined ? {} : { name: input.name }),
          ...(input.open === undefined ? {} : { open: input.open }),
          ...(input.auto_join === undefined ? {} : { autoJoin: input.auto_join }),
        },
        deps.clock.now(),
      );
      const prefix = await prefixOf(user);
      if (room.open && !after.open) {
        if ((await store.roomMemberIds(room.id)).length > CIRCLE_LIMITS.membersToClose)
          throw conflict(
            `A room of more than ${CIRCLE_LIMITS.membersToClose} members is not closed: make a closed room and add people to it`,
            'ROOM_TOO_BIG',
          );
        // Closing: the room becomes members-only, its members affiliated first so that none is sent out.
        const members = await businessStore(tx).peopleAmong(circle.id, await store.roomMemberIds(room.id), [
          'active',
        ]);
        const node = roomNode(prefix, circle, room.room_key);
        await deps.ejabberd.setRoomPlaces(
          members.map((member) => ({
            room: node,
            jid: identityJid(prefix, circle, member.identity_key),
            place: 'member' as const,
          })),
        );
      }
      if (after.name !== room.name || after.open !== room.open) await ensureRoom(user, circle, after);
      if (after.name !== room.name)
        await syncBookmarks(
          tx,
          prefix,
          circle,
          room.kind === 'board' ? undefined : await store.roomMemberIds(room.id),
        );
      return presentRoom(prefix, circle, after);
    },

    /** Archives a room: it leaves every member's app, takes no post, and keeps its history. */
    archiveRoom: async (user: UserPrincipal, orgId: string, roomId: string, tx: Transaction) => {
      const circle = await circleFor(tx, user, orgId, 'member', 'archive rooms', 'update');
      const room = await roomOf(tx, circle, roomId, 'update');
      needRoomRole(circle, room, 'archive rooms');
      if (room.archived_at !== null) return { ok: true as const, id: room.id };
      const store = circleStore(tx);
      await store.updateRoom(room.id, { archivedAt: deps.clock.now() }, deps.clock.now());
      await syncBookmarks(
        tx,
        await prefixOf(user),
        circle,
        room.kind === 'board' ? undefined : await store.roomMemberIds(room.id),
      );
      // Posts and entries are ejabberd's question: it forgets its answers.
      deps.orgs.reachChanged(tx, circle);
      return { ok: true as const, id: room.id };
    },

    joinRoom: async (user: UserPrincipal, orgId: string, roomId: string, tx: Transaction) => {
      const circle = await circleFor(tx, user, orgId, 'member', 'join rooms', 'key share');
      const room = await liveRoomOf(tx, circle, roomId);
      if (room.kind === 'board') throw conflict('Every member is on every board already', 'BOARD');
      if (!room.open)
        throw refused('This room is closed: its mods or its creator add people to it', 'ROOM_CLOSED');
      await circleStore(tx).joinRoom(room.id, [circle.my_member_id], deps.clock.now());
      await syncBookmarks(tx, await prefixOf(user), circle, [circle.my_member_id]);
      return presentWithRooms(tx, user, circle);
    },

    leaveRoom: async (user: UserPrincipal, orgId: string, roomId: string, tx: Transaction) => {
      const circle = await circleFor(tx, user, orgId, 'member', 'leave rooms', 'key share');
      const room = await roomOf(tx, circle, roomId, 'update');
      if (room.kind === 'board')
        throw conflict(
          'A board is not left: mute it instead (POST …/rooms/{room}/mute {"muted": true})',
          'BOARD_NOT_LEFT',
        );
      await outOfRoom(tx, user, circle, room, circle.my_member_id);
      return presentWithRooms(tx, user, circle);
    },

    /** Mutes a board (it stays in my app, not joined on login) or unmutes it. */
    muteBoard: async (
      user: UserPrincipal,
      orgId: string,
      roomId: string,
      input: { muted: boolean },
      tx: Transaction,
    ) => {
      const circle = await circleFor(tx, user, orgId, 'member', 'mute boards', 'key share');
      const room = await liveRoomOf(tx, circle, roomId);
      if (room.kind !== 'board')
        throw conflict('A room is not muted: leave it instead (POST …/rooms/{room}/leave)', 'ROOM_NOT_MUTED');
      await circleStore(tx).setMuted(room.id, circle.my_member_id, input.muted, deps.clock.now());
      await syncBookmarks(tx, await prefixOf(user), circle, [circle.my_member_id]);
      return presentWithRooms(tx, user, circle);
    },

    /** Adds a circle member to a room (its mods, or the room's creator). */
    addToRoom: async (
      user: UserPrincipal,
      orgId: string,
      roomId: string,
      input: { member_id: string },
      tx: Transaction,
    ) => {
      const circle = await circleFor(tx, user, orgId, 'member', 'add people to rooms', 'key share');
      const room = await liveRoomOf(tx, circle, roomId);
      needRoomRole(circle, room, 'add people to rooms');
      if (room.kind === 'board') throw conflict('Every member is on every board already', 'BOARD');
      const member = await memberOf(tx, circle, input.member_id);
      if (member.status !== 'active') throw memberNotFound();
      const store = circleStore(tx);
      await store.joinRoom(room.id, [member.id], deps.clock.now());
      const prefix = await prefixOf(user);
      if (!room.open)
        await placeMember(tx, prefix, circle, member, (each) => (each.id === room.id ? 'member' : null));
      await syncBookmarks(tx, prefix, circle, [member.id]);
      return presentMember(member);
    },

    /** Takes someone out of a room (mods); an open room they may join again. */
    removeFromRoom: async (
      user: UserPrincipal,
      orgId: string,
      roomId: string,
      memberId: string,
      tx: Transaction,
    ) => {
      const circle = await circleFor(tx, user, orgId, 'mod', 'take people out of rooms', 'key share');
      const room = await roomOf(tx, circle, roomId, 'update');
      if (room.kind === 'board')
        throw conflict('Nobody is taken out of a board: block the member instead', 'BOARD');
      const member = await memberOf(tx, circle, memberId, 'update');
      if (member.id !== circle.my_member_id && RANK[member.role as CircleRole] >= RANK[circle.my_role])
        throw refused('Only someone of a higher role takes them out of a room', 'CIRCLE_ROLE');
      // A blocked member is banned from every room: taken out of one, the ban there would go.
      if (member.status !== 'active')
        throw conflict('Only an active member is taken out of a room', 'NOT_ACTIVE');
      await outOfRoom(tx, user, circle, room, member.id);
      return { ok: true as const, id: member.id };
    },

    // ----- the chat server -------------------------------------------------------------------------

    /** The app's circle rooms, each with its shape (to bring them to a new room size). */
    rooms: async (scope: AppScope, chatPrefix: string) =>
      (await circleStore(deps.pool).roomsOfApp(scope)).map((row) => ({
        node: roomNode(chatPrefix, row, row.room_key),
        shape: roomShape(row),
      })),

    /**
     * mod_svc_scope's question (cached a minute per pair, forgotten on any change of the circle): may
     * `from` post in a circle's room (`to`), or enter it (`to` is `<room>/<nick>`)? An active member
     * of the live circle, in a room that is not archived, entering under their own tag; on a board
     * only admins and mods post. A closed room's affiliations decide who enters. Anything else is a
     * business's or an org's question.
     */
    mayReach: async (from: string, to: string): Promise<boolean> => {
      const target = CIRCLE_ROOM_NODE.exec(to);
      if (!target) return deps.businesses.mayReach(from, to);
      const [, prefix, chatKey, roomKey, nick] = target;
      const sender = parseOrgNode(from);
      if (!sender || sender.chatKey !== chatKey || sender.prefix !== prefix) return false;
      const org = await orgsStore(deps.pool).orgByChatKey(chatKey!);
      if (org?.kind !== 'circle' || org.status !== 'active') return false;
      const room = await circleStore(deps.pool).roomByKey(org.id, roomKey!);
      if (!room || room.archived_at !== null) return false;
      const member = await orgsStore(deps.pool).memberByIdentityKey(org.id, sender.name);
      if (member?.status !== 'active') return false;
      // Entering: under their own tag (the name before it is theirs to choose).
      if (nick !== undefined) return nick.endsWith(` #${member.identity_key.slice(0, NICK_TAG)}`);
      return room.kind === 'room' || RANK[member.role as CircleRole] >= RANK.mod;
    },
  };

  /** Someone out of one room: its row gone, sent out of it (a closed room's affiliation gone too). */
  async function outOfRoom(
    tx: Transaction,
    principal: Principal,
    circle: CircleRow,
    room: RoomRow,
    memberId: string,
  ) {
    const store = circleStore(tx);
    const member = (await store.member(circle.id, memberId))!;
    await store.leaveRoom(room.id, member.id);
    const prefix = await prefixOf(principal);
    await placeMember(tx, prefix, circle, member, (each) => (each.id === room.id ? 'none' : null));
    if (member.status === 'active') await syncBookmarks(tx, prefix, circle, [member.id]);
  }
}

export type CirclesService = ReturnType<typeof createCirclesService>;
