import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import type { RoomShape } from '../../adapters/ejabberd.js';
import { displayName, postText } from '../../platform/identities.js';
import { Cursor, Deleted, ListLimit, ListPageQuery, literalUnion, Page } from '../../platform/schemas.js';
import { E164_PATTERN } from '../messaging/schema.js';
import { LogoUrl, TITLE_MAX, Timestamps } from './schema.js';

/** Per user, per business (docs/businesses.md). */
export const BUSINESS_LIMITS = {
  /** Businesses a user owns at once (deleted ones do not count). */
  businessesPerOwner: 10,
  /** People on a business's team, invited and asking included. */
  teamPerBusiness: 1_000,
  groupsPerBusiness: 500,
  membersPerGroup: 200,
  shortcuts: 100,
  shortcutKeyMax: 32,
  shortcutTextMax: 1_000,
} as const;
export const BUSINESS_NAME_MAX = 100;
export const INBOX_LINE_MAX = 200;
export const GREETING_MAX = 1_000;
/** The inbox's staff room: its name within the business's nodes (no member's key has five letters). */
export const INBOX_ROOM = 'inbox';

/** A team's room (an org's team, a business's group): its members enter, nobody else. */
export const TEAM_ROOM_SHAPE = { membersOnly: true } as const satisfies RoomShape;
/** A business's inbox room: its staff, who are also subscribed to it (MUC/Sub). */
export const INBOX_ROOM_SHAPE = { membersOnly: true, subscriptions: true } as const satisfies RoomShape;
/** The first page of people that GET /v1/me/businesses/{org} includes. */
export const EMBEDDED_PEOPLE = 50;

/**
 * Codes people type: 8 characters from 30, none that reads as another (no 0/O, 1/I/L, U/V pairs
 * left: U is out). 30^8 ≈ 6.6 × 10^11, and lookups are rate-limited per user.
 */
export const CODE_ALPHABET = '23456789ABCDEFGHJKMNPQRSTVWXYZ';
export const CODE_LENGTH = 8;
/** Code lookups (GET, chat, join) and invites by code share this per-user cap. */
export const CODE_LOOKUPS = { name: 'code-lookups', limit: 60, windowSeconds: 3600 } as const;

export const BUSINESS_ROLES = ['owner', 'admin', 'staff'] as const;
export type BusinessRole = (typeof BUSINESS_ROLES)[number];
export const ACCESS = ['code', 'invited', 'nobody'] as const;
export const FRONT_DESKS = ['staff', 'greeting'] as const;
export const STAFF_NAMES = ['shown', 'hidden'] as const;
export const PERSON_STATUSES = ['active', 'disabled', 'invited', 'requested'] as const;

const BusinessName = displayName(BUSINESS_NAME_MAX, 'The business’s name');
const Access = literalUnion(ACCESS, {
  description:
    'Who may start a chat: code (anyone with the business’s code), invited (only customers the business opened a chat with), nobody',
});
const FrontDesk = literalUnion(FRONT_DESKS, {
  description:
    'Who answers a new conversation first: staff (the inbox’s staff), or greeting (the business’s greeting, posted as the business, then the staff)',
});
const StaffNames = literalUnion(STAFF_NAMES, {
  description:
    'shown: customers see each staff member’s title; hidden: only the business’s name. Either way with the staff member’s number, as in “Acme (3)”',
});
const Greeting = postText(GREETING_MAX, 'The greeting that answers a new conversation first');
const InboxName = displayName(BUSINESS_NAME_MAX, 'The public chat’s name');
const InboxLine = displayName(INBOX_LINE_MAX, 'The line customers see under the public chat’s name');
const Code = Type.String({
  pattern: `^[${CODE_ALPHABET}${CODE_ALPHABET.toLowerCase()}]{${CODE_LENGTH}}$`,
  description: `A code of ${CODE_LENGTH} characters from ${CODE_ALPHABET} (either case)`,
});

export const BusinessParams = Type.Object(
  { org: Type.String({ minLength: 1, maxLength: 64, description: 'The business’s id (org_…)' }) },
  { additionalProperties: false },
);
const Id = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });
export const PersonParams = Type.Object(
  { org: BusinessParams.properties.org, member_id: Id('A person of the team (mem_…)') },
  { additionalProperties: false },
);
export const InboxParams = Type.Object(
  { org: BusinessParams.properties.org, inbox: Id('The public chat’s id (inb_…)') },
  { additionalProperties: false },
);
export const InviteParams = Type.Object(
  { invite_id: Id('The invite’s id') },
  { additionalProperties: false },
);
export const CodeParams = Type.Object({ code: Code }, { additionalProperties: false });

export const BusinessWrite = Type.Object(
  {
    name: BusinessName,
    logo_url: Type.Optional(LogoUrl),
    access: Type.Optional(Access),
    calls: Type.Optional(Type.Boolean({ description: 'Calls between the team’s identities; default true' })),
    front_desk: Type.Optional(FrontDesk),
    greeting: Type.Optional(Greeting),
    staff_names: Type.Optional(StaffNames),
    inbox_name: Type.Optional(InboxName),
    inbox_line: Type.Optional(InboxLine),
  },
  { additionalProperties: false },
);

export const BusinessChange = Type.Object(
  {
    name: Type.Optional(BusinessName),
    logo_url: Type.Optional(Type.Union([LogoUrl, Type.Null()])),
    access: Type.Optional(Access),
    calls: Type.Optional(Type.Boolean()),
    front_desk: Type.Optional(FrontDesk),
    greeting: Type.Optional(Type.Union([Greeting, Type.Null()])),
    staff_names: Type.Optional(StaffNames),
    chat: Type.Optional(
      Type.Boolean({ description: 'Chat on or off: off closes every team session and refuses new chats' }),
    ),
    new_code: Type.Optional(
      Type.Literal(true, { description: 'A new business code; the old one finds nothing from now on' }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const Inbox = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    line: Type.Union([Type.String(), Type.Null()]),
  },
  { additionalProperties: false },
);

export const Business = Type.Object(
  {
    id: Type.String({ description: 'The business’s id: {org} in its paths' }),
    name: Type.String(),
    logo_url: Type.Union([Type.String(), Type.Null()]),
    status: literalUnion(['active', 'deleted'] as const),
    code: Type.Union([Type.String(), Type.Null()], { description: 'The business code; null once deleted' }),
    access: Access,
    calls: Type.Boolean(),
    chat: Type.Boolean(),
    front_desk: FrontDesk,
    greeting: Type.Union([Type.String(), Type.Null()]),
    staff_names: StaffNames,
    inbox: Inbox,
    my_role: literalUnion(BUSINESS_ROLES),
    team_count: Type.Integer({ description: 'People on the team, invited and asking included' }),
    ...Timestamps,
  },
  { additionalProperties: false },
);

export const Person = Type.Object(
  {
    id: Type.String({ description: 'member_id' }),
    user_id: Type.String({ description: 'The app user (their id)' }),
    role: literalUnion(BUSINESS_ROLES),
    title: Type.Union([Type.String(), Type.Null()]),
    status: literalUnion(PERSON_STATUSES, {
      description: 'invited: asked to join, not yet answered; requested: asking to join',
    }),
    inbox: Type.Union(
      [
        Type.Object(
          { may_reply: Type.Boolean(), nick: Type.String({ description: 'Their name in conversations' }) },
          { additionalProperties: false },
        ),
        Type.Null(),
      ],
      { description: 'Whether they work the public chat, and may reply there (null: they do not)' },
    ),
    ...Timestamps,
  },
  { additionalProperties: false },
);
export const PersonPage = Page(Person);

export const BusinessWithPeople = Type.Object(
  {
    ...Business.properties,
    people: Page(
      Person,
      `The first ${EMBEDDED_PEOPLE} people of the team, newest first; more from GET /v1/me/businesses/{org}/members`,
    ),
  },
  { additionalProperties: false },
);
export const BusinessPage = Page(Business, 'Businesses the user owns or administers, newest first');
export const BusinessDeleted = Deleted();

export const Shortcut = Type.Object(
  {
    key: Type.String({
      minLength: 1,
      maxLength: BUSINESS_LIMITS.shortcutKeyMax,
      pattern: '^[\\p{L}\\p{N}_-]+$',
      description: `What staff type to use it: 1-${BUSINESS_LIMITS.shortcutKeyMax} letters, digits, _ or -`,
    }),
    text: postText(BUSINESS_LIMITS.shortcutTextMax, 'The reply it stands for'),
  },
  { additionalProperties: false },
);
export const Shortcuts = Type.Object(
  {
    shortcuts: Type.Array(Shortcut, {
      maxItems: BUSINESS_LIMITS.shortcuts,
      description: `At most ${BUSINESS_LIMITS.shortcuts}, keys unique`,
    }),
  },
  { additionalProperties: false },
);

export const InboxWithStaff = Type.Object(
  {
    ...Inbox.properties,
    jid: Type.String({ description: 'The inbox’s staff room, in every staff identity’s bookmarks' }),
    conversation_room_prefix: Type.String({
      description: 'Every conversation room of the public chat starts with it',
    }),
    staff: Type.Array(
      Type.Object(
        { member_id: Type.String(), may_reply: Type.Boolean(), nick: Type.String() },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export const InboxList = Type.Object(
  { items: Type.Array(InboxWithStaff), next_cursor: Type.Null() },
  { additionalProperties: false, description: 'A business has one public chat' },
);
export const InboxChange = Type.Object(
  { name: Type.Optional(InboxName), line: Type.Optional(Type.Union([InboxLine, Type.Null()])) },
  { additionalProperties: false, minProperties: 1 },
);
export const StaffWrite = Type.Object(
  {
    staff: Type.Array(
      Type.Object(
        {
          member_id: Id('An active person of the team'),
          may_reply: Type.Boolean({ description: 'false: reads the conversations only' }),
        },
        { additionalProperties: false },
      ),
      { maxItems: BUSINESS_LIMITS.teamPerBusiness, description: 'Everyone who works the public chat' },
    ),
  },
  { additionalProperties: false },
);

/** By a personal code, or a phone the person registered (E.164). */
const Someone = {
  code: Type.Optional(Code),
  phone: Type.Optional(
    Type.String({ pattern: E164_PATTERN, description: 'A phone the person registered (E.164)' }),
  ),
};
export const InviteWrite = Type.Object(
  {
    ...Someone,
    role: Type.Optional(literalUnion(['admin', 'staff'] as const, { description: 'Default staff' })),
    title: Type.Optional(
      displayName(TITLE_MAX, 'Their title (their name in conversations when names are shown)'),
    ),
  },
  { additionalProperties: false, description: 'Exactly one of code and phone' },
);
export const CustomerWrite = Type.Object(
  { ...Someone },
  { additionalProperties: false, description: 'Exactly one of code and phone' },
);
export const PersonChange = Type.Object(
  {
    role: Type.Optional(
      literalUnion(BUSINESS_ROLES, { description: 'owner hands the business over (owner only)' }),
    ),
    title: Type.Optional(Type.Union([displayName(TITLE_MAX, 'Their title'), Type.Null()])),
    status: Type.Optional(
      literalUnion(['active', 'disabled'] as const, {
        description: 'disabled: cannot log in until restored',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const GroupWrite = Type.Object(
  {
    name: displayName(BUSINESS_NAME_MAX, 'The group’s name'),
    members: Type.Array(Id('An active person of the team'), {
      maxItems: BUSINESS_LIMITS.membersPerGroup - 1,
      uniqueItems: true,
      description: 'Who is in it besides its maker',
    }),
  },
  { additionalProperties: false },
);
export const Group = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    jid: Type.String({ description: 'The group’s room, in its members’ bookmarks' }),
    members: Type.Array(Type.String(), { description: 'member_ids' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const Invite = Type.Object(
  {
    id: Type.String({ description: 'invite_id' }),
    kind: literalUnion(['business', 'circle'] as const, {
      description: 'Who invites: a business or a circle',
    }),
    org: Type.Object(
      {
        id: Type.String({ description: 'The business’s or the circle’s id' }),
        name: Type.String(),
        logo_url: Type.Union([Type.String(), Type.Null()]),
      },
      { additionalProperties: false },
    ),
    role: literalUnion(['admin', 'staff', 'mod', 'member'] as const, {
      description: 'A business’s admin or staff; a circle’s admin, mod or member',
    }),
    title: Type.Union([Type.String(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);
export const InvitePage = Page(Invite, 'Businesses and circles that invited the user, newest first');
export const InviteAnswer = Type.Object(
  {
    id: Type.String(),
    status: literalUnion(['accepted', 'declined'] as const),
    member_id: Type.Union([Type.String(), Type.Null()], {
      description: 'On accept: the new identity (/v1/me/org-memberships/{member_id})',
    }),
  },
  { additionalProperties: false },
);

export const CodeLookup = Type.Object(
  {
    code: Type.String(),
    kind: literalUnion(['business', 'member', 'circle'] as const),
    name: Type.Union([Type.String(), Type.Null()], {
      description: 'The business’s or circle’s name, or the member’s profile name (null without a profile)',
    }),
    may_message: Type.Boolean({ description: 'Whether POST /v1/me/codes/{code}/chat would open a chat now' }),
    reason: Type.Union(
      [
        literalUnion(['own_code', 'chat_off', 'access_invited', 'access_nobody', 'circle'] as const, {
          description: 'circle: a circle’s code is joined (POST /v1/me/codes/{code}/join), not messaged',
        }),
        Type.Null(),
      ],
      { description: 'Why not, when may_message is false' },
    ),
    business: Type.Union([
      Type.Object(
        {
          id: Type.String(),
          logo_url: Type.Union([Type.String(), Type.Null()]),
          inbox: Type.Object(
            { name: Type.String(), line: Type.Union([Type.String(), Type.Null()]) },
            { additionalProperties: false },
          ),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ]),
    circle: Type.Union([
      Type.Object(
        {
          id: Type.String(),
          join_rule: literalUnion(['open', 'approval', 'invite'] as const),
          member_count: Type.Integer(),
          my_status: literalUnion(
            ['none', 'member', 'requested', 'rejected', 'invited', 'blocked', 'removed'] as const,
            {
              description:
                'My place: none yet, member, my join request waiting or turned down, invited, blocked, or removed (may rejoin by the rule)',
            },
          ),
        },
        { additionalProperties: false },
      ),
      Type.Null(),
    ]),
  },
  { additionalProperties: false },
);

export const ChatStart = Type.Object(
  {
    name: Type.Optional(
      displayName(64, 'Your name in a business conversation; default your profile’s, else “Customer”', {
        pattern: '^(?!.* \\([0-9]+\\)$)',
      }),
    ),
  },
  { additionalProperties: false },
);
export const ChatOpened = Type.Object(
  {
    kind: literalUnion(['business', 'member'] as const),
    jid: Type.String({ description: 'Where to chat: the conversation room, or the member’s address' }),
    conversation_id: Type.Union([Type.String(), Type.Null()]),
    created: Type.Boolean({ description: 'false: an earlier conversation reopened' }),
  },
  { additionalProperties: false },
);
export const JoinAnswer = Type.Object(
  {
    status: literalUnion(['requested', 'member'] as const, {
      description:
        'requested: the business’s or circle’s owner and admins decide; member: on the team or in the circle',
    }),
    kind: literalUnion(['business', 'circle'] as const),
    org_id: Type.String({ description: 'The business’s or the circle’s id' }),
    member_id: Type.String(),
  },
  { additionalProperties: false },
);

export const ConversationItem = Type.Object(
  {
    id: Type.String(),
    jid: Type.String({ description: 'The conversation room' }),
    customer_name: Type.String(),
    opened_by: literalUnion(['customer', 'business'] as const),
    created_at: Type.String({ format: 'date-time' }),
    reopened_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);
export const ConversationPage = Page(ConversationItem, 'The public chat’s conversations, newest first');

export const MyCode = Type.Object(
  { code: Type.String(), created_at: Type.String({ format: 'date-time' }) },
  { additionalProperties: false },
);

export const PeopleQuery = Type.Object(
  {
    limit: ListLimit(50),
    cursor: Type.Optional(Cursor),
    status: Type.Optional(literalUnion(PERSON_STATUSES)),
  },
  { additionalProperties: false },
);
export const BusinessPageQuery = ListPageQuery(50);

// ----- rows ------------------------------------------------------------------------------------------

export const BusinessRow = z.object({
  org_id: z.string(),
  access: z.enum(ACCESS),
  calls: z.boolean(),
  front_desk: z.enum(FRONT_DESKS),
  greeting: z.string().nullable(),
  staff_names: z.enum(STAFF_NAMES),
  inbox_id: z.string(),
  inbox_name: z.string(),
  inbox_line: z.string().nullable(),
  shortcuts: z.array(z.object({ key: z.string(), text: z.string() })),
  next_staff_number: z.number(),
});
export type BusinessRow = z.infer<typeof BusinessRow>;

export const StaffRow = z.object({
  member_id: z.string(),
  identity_key: z.string(),
  title: z.string().nullable(),
  may_reply: z.boolean(),
  number: z.number(),
  status: z.enum(PERSON_STATUSES),
});
export type StaffRow = z.infer<typeof StaffRow>;

export const ConversationRow = z.object({
  id: z.string(),
  org_id: z.string(),
  user_id: z.string(),
  room_key: z.string(),
  customer_name: z.string(),
  opened_by: z.enum(['customer', 'business']),
  created_at: z.date(),
  reopened_at: z.date(),
});
export type ConversationRow = z.infer<typeof ConversationRow>;

export const CodeRow = z.object({
  code: z.string(),
  user_id: z.string().nullable(),
  org_id: z.string().nullable(),
  created_at: z.date(),
});
export type CodeRow = z.infer<typeof CodeRow>;
