import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import { displayName, externalId } from '../../platform/identities.js';
import { Cursor, Deleted, ListLimit, ListPageQuery, literalUnion, Page } from '../../platform/schemas.js';
import { Micros, UsageLine, UsageTotal, Usd } from '../billing/schema.js';
import { ChatCredential, DEFAULT_CHAT_TTL, MAX_CHAT_TTL, MIN_CHAT_TTL } from '../chat/schema.js';
import {
  DEFAULT_LIVE_TTL,
  LiveTokenResponse,
  MAX_LIVE_TTL,
  MIN_LIVE_TTL,
  QUALITIES,
} from '../live/schema.js';

/** Per app and key mode, per org and per member (docs/orgs.md). */
export const ORG_LIMITS = {
  orgsPerApp: 10_000,
  membersPerOrg: 100_000,
  teamsPerOrg: 5_000,
  teamsPerMember: 100,
} as const;
export const ORG_NAME_MAX = 200;
export const TITLE_MAX = 100;
export const LOGO_URL_MAX = 2_048;
/** The first page of members and of teams that GET /v1/orgs/{org} includes. */
export const EMBEDDED_PAGE = 100;

export const POLICIES = ['anyone', 'teams', 'admins'] as const;
export const ROLES = ['admin', 'member', 'guest'] as const;
/** Every role a member may have: an org's (ROLES), a business's (owner, admin, staff), a circle's (owner, admin, mod, member). */
export const ANY_ROLES = ['admin', 'member', 'guest', 'owner', 'staff', 'mod'] as const;
export const ORG_STATUSES = ['active', 'suspended', 'deleted'] as const;
export const MEMBER_STATUSES = ['active', 'disabled'] as const;
/**
 * Every status a member may have: a business's team also has people invited and asking to join, a
 * circle also people blocked, removed and turned down.
 */
export const ANY_MEMBER_STATUSES = [
  'active',
  'disabled',
  'invited',
  'requested',
  'blocked',
  'removed',
  'rejected',
] as const;
/**
 * org: made by the app's server (/v1/orgs); business and circle: started by an app user
 * (/v1/me/businesses, /v1/me/circles).
 */
export const ORG_KINDS = ['org', 'business', 'circle'] as const;
export type Policy = (typeof POLICIES)[number];
export type Role = (typeof ROLES)[number];
export type AnyRole = (typeof ANY_ROLES)[number];

const Policy = literalUnion(POLICIES, {
  description:
    'Who may open a 1:1 with whom: anyone (any two members), teams (members who share a team), admins (only with an admin). Admins may reach anyone and guests only their own teams’ members and the admins, whatever the policy.',
});
const Role = literalUnion(ROLES, {
  description:
    'admin (reaches and is reached by everyone), member, or guest (only their own teams and the admins)',
});
const AnyRole = literalUnion(ANY_ROLES, {
  description:
    'An org’s: admin, member or guest; a business’s: owner, admin or staff (owner and admin reach everyone, like an org’s admin); a circle’s: owner, admin, mod or member',
});
const OrgKind = literalUnion(ORG_KINDS, {
  description:
    'org: the app’s own (/v1/orgs); business and circle: started by an app user and managed by them (/v1/me/businesses, /v1/me/circles), read-only here',
});
export const LogoUrl = Type.String({
  format: 'uri',
  pattern: '^https://',
  maxLength: LOGO_URL_MAX,
  description: 'An https URL of the logo (a storage object’s URL or any other)',
});
const OrgName = displayName(ORG_NAME_MAX, 'The org’s name');
export const Timestamps = {
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
};

export const OrgParams = Type.Object(
  { org: externalId('The org’s externalId') },
  { additionalProperties: false },
);
export const MemberParams = Type.Object(
  { org: externalId('The org’s externalId'), ext_id: externalId('The member’s ext_id') },
  { additionalProperties: false },
);
export const TeamParams = MemberParams;

export const OrgWrite = Type.Object(
  {
    externalId: externalId('The app’s own id of the org: the key of the create-or-update'),
    name: OrgName,
    logo_url: Type.Optional(Type.Union([LogoUrl, Type.Null()])),
    policy: Type.Optional(Policy),
    chat: Type.Optional(Type.Boolean({ description: 'Chat (and calls) on for the org; default true' })),
    replace_deleted: Type.Optional(
      Type.Boolean({
        description:
          'Create a new org under the externalId of a deleted one (whose records stay, apart); without it that is a 409 ORG_DELETED',
      }),
    ),
  },
  { additionalProperties: false },
);

export const OrgChange = Type.Object(
  {
    name: Type.Optional(OrgName),
    logo_url: Type.Optional(Type.Union([LogoUrl, Type.Null()])),
    policy: Type.Optional(Policy),
    chat: Type.Optional(Type.Boolean({ description: 'Chat and calls on or off; off closes every session' })),
    status: Type.Optional(
      literalUnion(['active', 'suspended'] as const, {
        description: 'suspended refuses every identity’s login and closes their sessions; active restores',
      }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

export const Org = Type.Object(
  {
    id: Type.String({ description: 'The bundle’s id of the org' }),
    external_id: Type.String(),
    name: Type.String(),
    logo_url: Type.Union([Type.String(), Type.Null()]),
    kind: OrgKind,
    policy: Policy,
    chat: Type.Boolean(),
    status: literalUnion(ORG_STATUSES),
    member_count: Type.Integer(),
    team_count: Type.Integer(),
    ...Timestamps,
    deleted_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { additionalProperties: false },
);

export const MemberWrite = Type.Object(
  {
    role: Type.Optional(Role),
    title: Type.Optional(Type.Union([displayName(TITLE_MAX, 'The member’s title'), Type.Null()])),
    user_id: Type.Optional(
      Type.Union([externalId('The app user this member is (their user id), or null to unlink'), Type.Null()]),
    ),
    teams: Type.Optional(
      Type.Array(externalId('A team’s ext_id'), {
        maxItems: ORG_LIMITS.teamsPerMember,
        uniqueItems: true,
        description: 'The teams the member is in (their ext_ids), replacing the earlier list',
      }),
    ),
    status: Type.Optional(
      literalUnion(MEMBER_STATUSES, { description: 'disabled: no chat for the member until restored' }),
    ),
  },
  { additionalProperties: false },
);

export const Member = Type.Object(
  {
    id: Type.String({ description: 'The member’s id: member_id under /v1/me/org-memberships' }),
    ext_id: Type.String(),
    user_id: Type.Union([Type.String(), Type.Null()]),
    role: AnyRole,
    title: Type.Union([Type.String(), Type.Null()]),
    status: literalUnion(ANY_MEMBER_STATUSES, {
      description:
        'active or disabled; a business’s team also has people invited and requested (asking to join)',
    }),
    teams: Type.Array(Type.String(), { description: 'The ext_ids of the member’s teams, in ext_id order' }),
    ...Timestamps,
  },
  { additionalProperties: false },
);

export const TeamWrite = Type.Object(
  { name: displayName(ORG_NAME_MAX, 'The team’s name') },
  { additionalProperties: false },
);

export const Team = Type.Object(
  {
    id: Type.String(),
    ext_id: Type.String(),
    name: Type.String(),
    ...Timestamps,
  },
  { additionalProperties: false },
);

export const OrgWithPeople = Type.Object(
  {
    ...Org.properties,
    members: Page(
      Member,
      `The first ${EMBEDDED_PAGE} members, newest first; more from GET /v1/orgs/{org}/members`,
    ),
    teams: Page(Team, `The first ${EMBEDDED_PAGE} teams, newest first; more from GET /v1/orgs/{org}/teams`),
  },
  { additionalProperties: false },
);

export const OrgChatTokenRequest = Type.Object(
  {
    name: Type.Optional(
      displayName(64, 'Room nickname; default the member’s own display name, else the ext_id'),
    ),
    ttl_seconds: Type.Integer({ minimum: MIN_CHAT_TTL, maximum: MAX_CHAT_TTL, default: DEFAULT_CHAT_TTL }),
  },
  { additionalProperties: false },
);

export const OrgChatCredential = Type.Object(
  {
    ...ChatCredential.properties,
    member_id: Type.String({ description: 'The member whose org identity this is' }),
    org: Type.String({ description: 'The org’s externalId' }),
  },
  {
    additionalProperties: false,
    description:
      'A credential for the member’s org identity: a JID of its own, apart from the user’s personal one. room_prefix starts every room of the org (its team rooms).',
  },
);

const Jid = Type.String({ description: 'The member’s org identity: its chat address' });

/** A member as other members may see them: never the app user behind the identity. */
export const DirectoryEntry = Type.Object(
  {
    id: Type.String(),
    ext_id: Type.String(),
    role: AnyRole,
    title: Type.Union([Type.String(), Type.Null()]),
    teams: Type.Array(Type.String()),
    jid: Jid,
  },
  { additionalProperties: false },
);
export const DirectoryPage = Page(
  DirectoryEntry,
  'Active members this member may open a 1:1 with under the org’s policy, newest first',
);

const WithMember = externalId('The other member’s ext_id');
export const ConversationRequest = Type.Object(
  { member: externalId('The member who opens it (ext_id)'), with: WithMember },
  { additionalProperties: false },
);
export const MyConversationRequest = Type.Object({ with: WithMember }, { additionalProperties: false });

const Peer = Type.Object(
  { id: Type.String(), ext_id: Type.String(), jid: Jid },
  { additionalProperties: false },
);
export const Conversation = Type.Object(
  { member: Peer, with: Peer },
  {
    additionalProperties: false,
    description:
      'The two identities may now chat: send to with.jid from member’s org identity (ejabberd checks the same policy on every stanza)',
  },
);

export const CallTokenRequest = Type.Object(
  {
    team: Type.Optional(externalId('A team of the member: a call in its team room')),
    with: Type.Optional(externalId('Another member (ext_id): a 1:1 call, if the policy allows it')),
    publish: Type.Optional(Type.Boolean({ description: 'Whether this participant publishes; default true' })),
    quality: Type.Optional(literalUnion(QUALITIES, { description: 'Declared video quality; default hd' })),
    ttl_seconds: Type.Integer({ minimum: MIN_LIVE_TTL, maximum: MAX_LIVE_TTL, default: DEFAULT_LIVE_TTL }),
  },
  { additionalProperties: false, description: 'Exactly one of team and with' },
);
export const CallToken = Type.Object(
  {
    ...LiveTokenResponse.properties,
    identity: Type.String({ description: 'The member’s identity in the call (not the user’s personal one)' }),
  },
  { additionalProperties: false },
);

export const MembershipParams = Type.Object(
  { member_id: Type.String({ minLength: 1, maxLength: 64, description: 'The membership’s id (mem_…)' }) },
  { additionalProperties: false },
);

export const Membership = Type.Object(
  {
    id: Type.String({ description: 'member_id' }),
    ext_id: Type.String(),
    role: AnyRole,
    title: Type.Union([Type.String(), Type.Null()]),
    status: literalUnion(MEMBER_STATUSES),
    teams: Type.Array(Type.String()),
    jid: Jid,
    display_name: Type.Union([Type.String(), Type.Null()]),
    muted: Type.Boolean(),
    org: Type.Object(
      {
        external_id: Type.String({ description: 'An org’s externalId; a business’s id' }),
        kind: OrgKind,
        name: Type.String(),
        logo_url: Type.Union([Type.String(), Type.Null()]),
        status: literalUnion(['active', 'suspended'] as const),
        chat: Type.Boolean(),
      },
      { additionalProperties: false },
    ),
    ...Timestamps,
  },
  { additionalProperties: false },
);
export const MembershipPage = Page(Membership, 'The user’s org identities, one per org, newest first');

export const MembershipChange = Type.Object(
  {
    display_name: Type.Optional(
      Type.Union([displayName(64, 'How this identity is shown (its default chat nickname)'), Type.Null()]),
    ),
    muted: Type.Optional(
      Type.Boolean({ description: 'Notifications off for this identity (the app’s client honours it)' }),
    ),
  },
  { additionalProperties: false, minProperties: 1 },
);

/** The usage report's window: up to 366 UTC days, both ends included; the last 30 by default. */
export const MAX_USAGE_WINDOW_DAYS = 366;
export const DEFAULT_USAGE_WINDOW_DAYS = 30;
const Day = (description: string) => Type.String({ format: 'date', description });

export const OrgUsageQuery = Type.Object(
  {
    frm: Type.Optional(Day('First UTC day (YYYY-MM-DD); default 29 days before `to`')),
    to: Type.Optional(Day('Last UTC day (YYYY-MM-DD), included; default today')),
  },
  { additionalProperties: false },
);
export const OrgsUsageQuery = Type.Object(
  {
    ...OrgUsageQuery.properties,
    limit: ListLimit(50, 'Orgs per page'),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);

const UsageLineOfOrg = Type.Object(
  {
    ...UsageLine.properties,
    list_price_usd: Usd('The quantity at list price, before any free allowance'),
    list_price_micros: Micros('The same list price'),
  },
  { additionalProperties: false },
);
const UsageOfOrg = {
  org: Type.String({ description: 'The org’s externalId' }),
  id: Type.String(),
  usage: Type.Array(UsageLineOfOrg, {
    description:
      'Per UTC day, product and metric, newest day first: the org identities’ monthly active users and call minutes',
  }),
  total: Type.Object(
    {
      ...UsageTotal.properties,
      list_price_usd: Usd('List price of the window'),
      list_price_micros: Micros('The same'),
    },
    { additionalProperties: false },
  ),
};
export const OrgUsage = Type.Object(
  { from: Type.String({ format: 'date' }), to: Type.String({ format: 'date' }), ...UsageOfOrg },
  { additionalProperties: false },
);
export const OrgsUsage = Type.Object(
  {
    from: Type.String({ format: 'date' }),
    to: Type.String({ format: 'date' }),
    items: Type.Array(Type.Object(UsageOfOrg, { additionalProperties: false }), {
      description: 'The app’s orgs (deleted ones too), newest first',
    }),
    next_cursor: Type.Union([Type.String(), Type.Null()]),
  },
  { additionalProperties: false },
);

/** mod_svc_scope's question: may one org identity send to another (local parts)? */
export const ReachQuestion = Type.Object(
  { from: Type.String({ maxLength: 1023 }), to: Type.String({ maxLength: 1023 }) },
  { additionalProperties: false },
);
export const ReachAnswer = Type.Object({ ok: Type.Boolean() }, { additionalProperties: false });

export const OrgPage = Page(Org);
export const MemberPage = Page(Member);
export const TeamPage = Page(Team);
export const PageQuery = ListPageQuery(50);
export const OrgListQuery = Type.Object(
  {
    limit: ListLimit(50),
    cursor: Type.Optional(Cursor),
    status: Type.Optional(literalUnion(ORG_STATUSES)),
  },
  { additionalProperties: false },
);
export const OrgDeleted = Deleted();

// ----- rows ------------------------------------------------------------------------------------------

export const OrgRow = z.object({
  id: z.string(),
  app_id: z.string(),
  mode: z.enum(['live', 'test']),
  external_id: z.string(),
  kind: z.enum(ORG_KINDS),
  chat_key: z.string(),
  name: z.string(),
  logo_url: z.string().nullable(),
  policy: z.enum(POLICIES),
  chat_enabled: z.boolean(),
  status: z.enum(ORG_STATUSES),
  member_count: z.number(),
  team_count: z.number(),
  created_at: z.date(),
  updated_at: z.date(),
  deleted_at: z.date().nullable(),
});
export type OrgRow = z.infer<typeof OrgRow>;

export const MemberRow = z.object({
  id: z.string(),
  org_id: z.string(),
  ext_id: z.string(),
  identity_key: z.string(),
  user_id: z.string().nullable(),
  role: z.enum(ANY_ROLES),
  title: z.string().nullable(),
  status: z.enum(ANY_MEMBER_STATUSES),
  display_name: z.string().nullable(),
  muted: z.boolean(),
  teams: z.array(z.string()),
  created_at: z.date(),
  updated_at: z.date(),
});
export type MemberRow = z.infer<typeof MemberRow>;

/** A member with what the member's own user sees of the org. */
export const MembershipRow = MemberRow.extend({
  org_external_id: z.string(),
  org_kind: z.enum(ORG_KINDS),
  org_name: z.string(),
  org_logo_url: z.string().nullable(),
  org_status: z.enum(ORG_STATUSES),
  org_chat: z.boolean(),
  org_chat_key: z.string(),
});
export type MembershipRow = z.infer<typeof MembershipRow>;

export const TeamRow = z.object({
  id: z.string(),
  org_id: z.string(),
  ext_id: z.string(),
  name: z.string(),
  created_at: z.date(),
  updated_at: z.date(),
});
export type TeamRow = z.infer<typeof TeamRow>;
