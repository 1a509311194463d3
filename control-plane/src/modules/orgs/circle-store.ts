import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import { type CircleRole, CircleSettingsRow, RoomRow } from './circle-schema.js';
import { MemberRow, OrgRow } from './schema.js';
import { after, memberColumns, orgColumnsOf } from './store.js';

interface Scope {
  appId: string;
  mode: KeyMode;
}

const orgColumns = orgColumnsOf('o');
const roomColumns = sql.fragment`
  r.id, r.org_id, r.kind, r.room_key, r.name, r.open, r.auto_join, r.created_by, r.created_at, r.updated_at,
  r.archived_at`;

/** A circle: its org, its settings, its code, and the caller's place when they have one. */
export const CircleRow = OrgRow.merge(CircleSettingsRow.omit({ org_id: true })).extend({
  code: z.string().nullable(),
  my_member_id: z.string().nullable(),
  my_role: z.enum(['owner', 'admin', 'mod', 'member']).nullable(),
  active_count: z.number(),
});
export type CircleRow = z.infer<typeof CircleRow>;

export const BookmarkPlacesRow = z.object({
  id: z.string(),
  identity_key: z.string(),
  display_name: z.string().nullable(),
  room_ids: z.array(z.string()),
});
export type BookmarkPlacesRow = z.infer<typeof BookmarkPlacesRow>;

/** Which members a list shows: `pending` is invited and requested together. */
export type MemberFilter = 'active' | 'blocked' | 'pending' | 'removed';
const STATUSES_OF: Record<MemberFilter, readonly string[]> = {
  active: ['active'],
  blocked: ['blocked'],
  pending: ['invited', 'requested'],
  removed: ['removed'],
};

/** SQL of circles, their rooms and boards, and who is in which room. */
export function circleStore(db: Db) {
  /** A circle with the user's place in it (null when they are not an active member). */
  const circleSelect = (me: string) => sql.fragment`
    select ${orgColumns}, c.join_rule, c.members_create_rooms, c.calls,
           (select k.code from codes k where k.org_id = o.id) as code,
           m.id as my_member_id, m.role as my_role,
           (select count(*) from org_members a where a.org_id = o.id and a.status = 'active')::int as active_count
    from orgs o join circles c on c.org_id = o.id
    left join org_members m on m.org_id = o.id and m.user_id = ${me} and m.status = 'active'`;

  return {
    /**
     * `update` for a change of the circle itself; `key share` for a change of its people or rooms,
     * which may run side by side (the circle cannot be deleted or changed meanwhile).
     */
    circle: (scope: Scope, orgId: string, me: string, lock?: 'update' | 'key share') =>
      db.maybeOne(sql.type(CircleRow)`
        ${circleSelect(me)}
        where o.id = ${orgId} and o.app_id = ${scope.appId} and o.mode = ${scope.mode} and o.kind = 'circle'
        ${lock === 'update' ? sql.fragment`for update of o, c` : lock === 'key share' ? sql.fragment`for key share of o, c` : sql.fragment``}`),

    /** The circles a user is an active member of (not deleted), newest first. */
    circlesOf: (scope: Scope, userId: string, limit: number, position?: Position) =>
      db.any(sql.type(CircleRow)`
        ${circleSelect(userId)}
        where o.app_id = ${scope.appId} and o.mode = ${scope.mode} and o.kind = 'circle'
          and o.status <> 'deleted' and m.id is not null ${after(position, 'o')}
        order by o.created_at desc, o.id desc
        limit ${limit + 1}`),

    /**
     * People who hold a place in the circle or ask for one (all but the removed and the turned down),
     * counted once the other changes of the circle's people that are under way have committed: the
     * lock is held to the end of the transaction, which takes it last.
     */
    peopleCountToCommit: async (orgId: string) => {
      await db.query(
        sql.unsafe`select pg_advisory_xact_lock(hashtextextended(${`circle-people\t${orgId}`}, 0))`,
      );
      return db.oneFirst(sql.type(z.object({ count: z.number() }))`
        select count(*)::int as count from org_members
        where org_id = ${orgId} and status not in ('removed', 'rejected')`);
    },

    roomCount: (orgId: string) =>
      db.oneFirst(sql.type(z.object({ count: z.number() }))`
        select count(*)::int as count from circle_rooms where org_id = ${orgId}`),

    /** A circle's rooms of every app the scope's prefix serves (to bring them to a new room size). */
    roomsOfApp: (scope: Scope) =>
      db.any(
        sql.type(
          z.object({
            chat_key: z.string(),
            room_key: z.string(),
            kind: z.string(),
            name: z.string(),
            open: z.boolean(),
          }),
        )`
        select o.chat_key, r.room_key, r.kind, r.name, r.open from circle_rooms r join orgs o on o.id = r.org_id
        where o.app_id = ${scope.appId} and o.mode = ${scope.mode} and o.status <> 'deleted'`,
      ),

    createCircle: (row: CircleSettingsRow) =>
      db.query(sql.unsafe`
        insert into circles (org_id, join_rule, members_create_rooms, calls)
        values (${row.org_id}, ${row.join_rule}, ${row.members_create_rooms}, ${row.calls})`),

    updateCircle: (
      orgId: string,
      changes: { joinRule?: CircleSettingsRow['join_rule']; membersCreateRooms?: boolean; calls?: boolean },
    ) =>
      db.query(sql.unsafe`
        update circles set
          join_rule = coalesce(${changes.joinRule ?? null}, join_rule),
          members_create_rooms = coalesce(${changes.membersCreateRooms ?? null}, members_create_rooms),
          calls = coalesce(${changes.calls ?? null}, calls)
        where org_id = ${orgId}`),

    // ----- members ---------------------------------------------------------------------------------

    /** Members in a filter, newest first; `q` matches part of their display name or user id. */
    members: (
      orgId: string,
      filter: MemberFilter,
      q: string | undefined,
      limit: number,
      position?: Position,
    ) =>
      db.any(sql.type(MemberRow)`
        select ${memberColumns} from org_members m
        where m.org_id = ${orgId} and m.status = any(${sql.array(STATUSES_OF[filter], 'text')})
          ${
            q === undefined
              ? sql.fragment``
              : sql.fragment`and (strpos(lower(coalesce(m.display_name, '')), lower(${q})) > 0
                                  or strpos(lower(coalesce(m.user_id, '')), lower(${q})) > 0)`
          }
          ${after(position, 'm')}
        order by m.created_at desc, m.id desc
        limit ${limit + 1}`),

    /**
     * A user's place in a circle. Locked, the user's turn is taken first: a row not there yet locks
     * nothing, and two writers of one new place (a double-tapped join, an invite as the person joins)
     * would both insert it.
     */
    memberOfUser: async (orgId: string, userId: string, lock?: 'update') => {
      if (lock)
        await db.query(
          sql.unsafe`select pg_advisory_xact_lock(hashtextextended(${`circle-place\t${orgId}\t${userId}`}, 0))`,
        );
      return db.maybeOne(sql.type(MemberRow)`
        select ${memberColumns} from org_members m where m.org_id = ${orgId} and m.user_id = ${userId}
        ${lock ? sql.fragment`for update of m` : sql.fragment``}`);
    },

    member: (orgId: string, memberId: string, lock?: 'update') =>
      db.maybeOne(sql.type(MemberRow)`
        select ${memberColumns} from org_members m where m.org_id = ${orgId} and m.id = ${memberId}
        ${lock ? sql.fragment`for update of m` : sql.fragment``}`),

    setPlace: (memberId: string, place: { role?: CircleRole; status?: MemberRow['status'] }, at: Date) =>
      db.query(sql.unsafe`
        update org_members set role = coalesce(${place.role ?? null}, role),
               status = coalesce(${place.status ?? null}, status), updated_at = ${sql.timestamp(at)}
        where id = ${memberId}`),

    // ----- rooms and boards ------------------------------------------------------------------------

    rooms: (orgId: string) =>
      db.any(sql.type(RoomRow)`
        select ${roomColumns} from circle_rooms r where r.org_id = ${orgId} order by r.seq`),

    room: (orgId: string, roomId: string, lock?: 'update') =>
      db.maybeOne(sql.type(RoomRow)`
        select ${roomColumns} from circle_rooms r where r.org_id = ${orgId} and r.id = ${roomId}
        ${lock ? sql.fragment`for update` : sql.fragment``}`),

    createRoom: (row: Omit<RoomRow, 'updated_at' | 'archived_at'>) =>
      db.one(sql.type(RoomRow)`
        insert into circle_rooms as r (id, org_id, kind, room_key, name, open, auto_join, created_by, created_at,
                                    updated_at)
        values (${row.id}, ${row.org_id}, ${row.kind}, ${row.room_key}, ${row.name}, ${row.open}, ${row.auto_join},
                ${row.created_by}, ${sql.timestamp(row.created_at)}, ${sql.timestamp(row.created_at)})
        returning ${roomColumns}`),

    updateRoom: (
      roomId: string,
      changes: { name?: string; open?: boolean; autoJoin?: boolean; archivedAt?: Date },
      at: Date,
    ) =>
      db.one(sql.type(RoomRow)`
        update circle_rooms r set
          name = coalesce(${changes.name ?? null}, name),
          open = coalesce(${changes.open ?? null}, open),
          auto_join = coalesce(${changes.autoJoin ?? null}, auto_join),
          archived_at = coalesce(${changes.archivedAt ? sql.timestamp(changes.archivedAt) : null}, archived_at),
          updated_at = ${sql.timestamp(at)}
        where id = ${roomId}
        returning ${roomColumns}`),

    setRoomCreator: (roomId: string, memberId: string) =>
      db.query(sql.unsafe`update circle_rooms set created_by = ${memberId} where id = ${roomId}`),

    /** Puts members in a room (those already in stay as they are). */
    joinRoom: (roomId: string, memberIds: readonly string[], at: Date) =>
      db.query(sql.unsafe`
        insert into circle_room_members (room_id, member_id, joined_at)
        select ${roomId}, unnest(${sql.array(memberIds, 'text')}::text[]), ${sql.timestamp(at)}
        on conflict do nothing`),

    leaveRoom: (roomId: string, memberId: string) =>
      db.query(
        sql.unsafe`delete from circle_room_members where room_id = ${roomId} and member_id = ${memberId}`,
      ),

    /** A member out of every room of the circle (removal, block). */
    leaveEveryRoom: (orgId: string, memberId: string) =>
      db.query(sql.unsafe`
        delete from circle_room_members rm using circle_rooms r
        where rm.room_id = r.id and r.org_id = ${orgId} and rm.member_id = ${memberId}`),

    /** A board muted (its row) or not (no row). */
    setMuted: (roomId: string, memberId: string, muted: boolean, at: Date) =>
      db.query(
        muted
          ? sql.unsafe`
              insert into circle_room_members (room_id, member_id, muted, joined_at)
              values (${roomId}, ${memberId}, true, ${sql.timestamp(at)}) on conflict do nothing`
          : sql.unsafe`delete from circle_room_members where room_id = ${roomId} and member_id = ${memberId}`,
      ),

    /** The rooms a member is in (a board's row: muted), with whether they muted each. */
    placesOf: (memberId: string) =>
      db.any(sql.type(z.object({ room_id: z.string(), muted: z.boolean() }))`
        select room_id, muted from circle_room_members where member_id = ${memberId}`),

    roomByKey: (orgId: string, roomKey: string) =>
      db.maybeOne(sql.type(RoomRow)`
        select ${roomColumns} from circle_rooms r where r.org_id = ${orgId} and r.room_key = ${roomKey}`),

    /** Whether a member is in a room (has its row). */
    inRoom: (roomId: string, memberId: string) =>
      db.exists(sql.type(z.object({ exists: z.boolean() }))`
        select 1 from circle_room_members where room_id = ${roomId} and member_id = ${memberId}`),

    /** The ids of a room's members who are active in the circle. */
    roomMemberIds: (roomId: string) =>
      db.anyFirst(sql.type(z.object({ member_id: z.string() }))`
        select rm.member_id from circle_room_members rm join org_members m on m.id = rm.member_id
        where rm.room_id = ${roomId} and m.status = 'active'`),

    /**
     * What active members' bookmarks are made of: their identity, their name, the rooms they are in and
     * the boards they muted. All active members, or those named.
     */
    bookmarkPlaces: (orgId: string, memberIds?: readonly string[]) =>
      db.any(sql.type(BookmarkPlacesRow)`
        select m.id, m.identity_key, m.display_name,
               coalesce(array_agg(rm.room_id) filter (where rm.room_id is not null), '{}') as room_ids
        from org_members m left join circle_room_members rm on rm.member_id = m.id
        where m.org_id = ${orgId} and m.status = 'active'
          ${memberIds === undefined ? sql.fragment`` : sql.fragment`and m.id = any(${sql.array(memberIds, 'text')})`}
        group by m.id`),
  };
}
