import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import { displayName, postText } from '../../platform/identities.js';
import { Cursor, Deleted, ListLimit, literalUnion, Page } from '../../platform/schemas.js';
import { E164_PATTERN } from '../messaging/schema.js';
import { Timestamps } from './schema.js';

/** Per user and per circle (docs/circles.md). */
export const CIRCLE_LIMITS = {
  /** Circles a user owns at once. */
  circlesPerOwner: 20,
  /** People in a circle, every status but removed. */
  membersPerCircle: 10_000,
  /** Rooms and boards of a circle, archived ones included. */
  roomsPerCircle: 200,
  /**
   * Members of an open room that may be closed: ejabberd rewrites a closed room's whole member list
   * at each of them, so closing costs the square of its size.
   */
  membersToClose: 1_000,
} as const;
export const CIRCLE_NAME_MAX = 100;
export const ROOM_NAME_MAX = 100;

export const CIRCLE_ROLES = ['owner', 'admin', 'mod', 'member'] as const;
export type CircleRole = (typeof CIRCLE_ROLES)[number];
export const JOIN_RULES = ['open', 'approval', 'invite'] as const;
export const CIRCLE_MEMBER_STATUSES = [
  'active',
  'blocked',
  'invited',
  'requested',
  'removed',
  'rejected',
] as const;
export const ROOM_KINDS = ['room', 'board'] as const;
/** The rooms every circle starts with. */
export const ANNOUNCEMENTS = 'Announcements';
export const GENERAL = 'General';

const Id = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });
const JoinRule = literalUnion(JOIN_RULES, {
  description:
    'open: anyone with the code joins at once; approval: a request admins approve or reject; invite: only invited people join',
});

export const CircleParams = Type.Object(
  { circle: Id('The circle’s id (org_…)') },
  { additionalProperties: false },
);
export const CircleMemberParams = Type.Object(
  { circle: CircleParams.properties.circle, member_id: Id('A member of the circle (mem_…)') },
  { additionalProperties: false },
);
export const CircleRequestParams = Type.Object(
  { circle: CircleParams.properties.circle, request_id: Id('A join request (its member id)') },
  { additionalProperties: false },
);
export const RoomParams = Type.Object(
  { circle: CircleParams.properties.circle, room: Id('A room or board (room_…)') },
  { additionalProperties: false },
);
export const RoomMemberParams = Type.Object(
  { ...RoomParams.properties, member_id: Id('A member of the circle') },
  { additionalProperties: false },
);

export const CircleWrite = Type.Object(
  {
    name: displayName(CIRCLE_NAME_MAX, 'The circle’s name'),
    join_rule: Type.Optional(JoinRule),
    members_create_rooms: Type.Optional(Type.Boolean({ description: 'Default false: admins and mods only' })),
    calls: Type.Optional(Type.Boolean({ description: 'Calls in the circle’s rooms; default true' })),
  },
  { additionalProperties: false },
);
export const CircleChange = Type.Object(
  {
    name: Type.Optional(displayName(CIRCLE_NAME_MAX, 'The circle’s name')),
    join_rule: Type.Optional(JoinRule),
    members_create_rooms: Type.Optional(Type.Boolean()),
    calls: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const Room = Type.Object(
  {
    id: Type.String(),
    kind: literalUnion(ROOM_KINDS, { description: 'room: everyone chats; board: admins and mods announce' }),
    name: Type.String(),
    jid: Type.String({ description: 'The room on the chat server' }),
    open: Type.Boolean({ description: 'Any member may join it (boards hold every member)' }),
    auto_join: Type.Boolean({ description: 'New members are put in it' }),
    archived: Type.Boolean({ description: 'Nobody posts; it left every member’s app; its history stays' }),
    ...Timestamps,
  },
  { additionalProperties: false },
);
export const RoomWrite = Type.Object(
  {
    kind: literalUnion(ROOM_KINDS),
    name: displayName(ROOM_NAME_MAX, 'The room’s name'),
    open: Type.Optional(Type.Boolean({ description: 'Default true' })),
    auto_join: Type.Optional(Type.Boolean({ description: 'Default false' })),
  },
  { additionalProperties: false },
);
export const RoomChange = Type.Object(
  {
    name: Type.Optional(displayName(ROOM_NAME_MAX, 'The room’s name')),
    open: Type.Optional(Type.Boolean()),
    auto_join: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const Circle = Type.Object(
  {
    id: Type.String({ description: '{circle} in its paths' }),
    name: Type.String(),
    code: Type.String({ description: 'The circle’s code: POST /v1/me/codes/{code}/join' }),
    join_rule: JoinRule,
    members_create_rooms: Type.Boolean(),
    calls: Type.Boolean(),
    member_count: Type.Integer({ description: 'People in the circle, every status but removed' }),
    my_role: literalUnion(CIRCLE_ROLES),
    ...Timestamps,
  },
  { additionalProperties: false },
);
export const CirclePage = Page(Circle, 'The circles the user is in, newest first');
export const CircleWithRooms = Type.Object(
  {
    ...Circle.properties,
    boards: Type.Array(Room),
    rooms: Type.Array(Room, { description: 'Its rooms that are not archived' }),
    me: Type.Object(
      {
        member_id: Type.String(),
        role: literalUnion(CIRCLE_ROLES),
        muted_boards: Type.Array(Type.String(), { description: 'Ids of the boards I muted' }),
        joined_rooms: Type.Array(Type.String(), { description: 'Ids of the rooms I am in' }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);

export const CircleMember = Type.Object(
  {
    id: Type.String({ description: 'member_id' }),
    user_id: Type.String(),
    role: literalUnion(CIRCLE_ROLES),
    status: literalUnion(CIRCLE_MEMBER_STATUSES, {
      description:
        'invited and requested are pending; removed may rejoin by the circle’s rule; blocked may not',
    }),
    display_name: Type.Union([Type.String(), Type.Null()]),
    ...Timestamps,
  },
  { additionalProperties: false },
);
export const CircleMemberPage = Page(CircleMember);
export const CircleMembersQuery = Type.Object(
  {
    // Text people type: a control character (a NUL, which PostgreSQL's text cannot hold) is a 422.
    q: Type.Optional(postText(100, 'Part of a member’s display name or user id')),
    status: Type.Optional(
      literalUnion(['active', 'blocked', 'pending', 'removed'] as const, { description: 'Default active' }),
    ),
    limit: ListLimit(50),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);
export const CircleInviteWrite = Type.Object(
  {
    code: Type.Optional(Type.String({ minLength: 8, maxLength: 8, description: 'A personal code' })),
    phone: Type.Optional(
      Type.String({ pattern: E164_PATTERN, description: 'A phone the person registered' }),
    ),
  },
  { additionalProperties: false, description: 'Exactly one of code and phone' },
);
export const CircleMemberChange = Type.Object(
  {
    role: Type.Optional(literalUnion(['owner', 'admin', 'mod', 'member'] as const)),
    status: Type.Optional(
      literalUnion(['active', 'blocked'] as const, { description: 'blocked or restored' }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);
export const RoomMemberWrite = Type.Object(
  { member_id: Id('A member of the circle') },
  { additionalProperties: false },
);
export const CircleDeleted = Deleted();

// ----- rows ------------------------------------------------------------------------------------------

export const CircleSettingsRow = z.object({
  org_id: z.string(),
  join_rule: z.enum(JOIN_RULES),
  members_create_rooms: z.boolean(),
  calls: z.boolean(),
});
export type CircleSettingsRow = z.infer<typeof CircleSettingsRow>;

export const RoomRow = z.object({
  id: z.string(),
  org_id: z.string(),
  kind: z.enum(ROOM_KINDS),
  room_key: z.string(),
  name: z.string(),
  open: z.boolean(),
  auto_join: z.boolean(),
  created_by: z.string().nullable(),
  created_at: z.date(),
  updated_at: z.date(),
  archived_at: z.date().nullable(),
});
export type RoomRow = z.infer<typeof RoomRow>;
