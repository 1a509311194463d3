import { randomInt } from 'node:crypto';
import type { DatabasePool } from 'slonik';
import type { Bookmark, EjabberdClient, RoomPerson } from '../../adapters/ejabberd.js';
import type { Principal, UserPrincipal } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors, ServiceError } from '../../platform/errors.js';
import {
  orgNode,
  orgNodePrefix,
  parseOrgNode,
  parseScopedNode,
  scopedNode,
} from '../../platform/identities.js';
import { newId } from '../../platform/ids.js';
import { type Db, inTransaction, type Transaction } from '../../platform/transaction.js';
import type { MessagingService } from '../messaging/service.js';
import type { RealtimeService } from '../realtime/service.js';
import type { SocialService } from '../social/service.js';
import {
  BUSINESS_LIMITS,
  type BusinessRole,
  CODE_ALPHABET,
  CODE_LENGTH,
  type ConversationRow,
  EMBEDDED_PEOPLE,
  INBOX_ROOM,
  INBOX_ROOM_SHAPE,
  type PERSON_STATUSES,
  type StaffRow,
  TEAM_ROOM_SHAPE,
} from './business-schema.js';
import {
  type BusinessChanges,
  type BusinessOrgRow,
  businessStore,
  type InviteRow,
  type PersonRow,
} from './business-store.js';
import { newChatKey, newNodeKey } from './keys.js';
import type { OrgsService } from './service.js';
import { orgsStore } from './store.js';

const iso = (date: Date) => date.toISOString();

/**
 * Whether a nickname ejabberd read (resourceprep: characters mapped to nothing, then NFKC) is the one
 * the bundle gave.
 */
/** RFC 3454's table B.1 (characters mapped to nothing), as code points. */
const MAPPED_TO_NOTHING = new Set([
  0xad,
  0x34f,
  0x1806,
  0x180b,
  0x180c,
  0x180d,
  0x200b,
  0x200c,
  0x200d,
  0x2060,
  ...Array.from({ length: 16 }, (_, i) => 0xfe00 + i),
  0xfeff,
]);
const prepared = (nick: string) =>
  [...nick]
    .filter((char) => !MAPPED_TO_NOTHING.has(char.codePointAt(0)!))
    .join('')
    .normalize('NFKC');
const sameNick = (read: string, given: string) => prepared(read) === prepared(given);

/** How every staff name ends ("Acme (3)"): no customer's name ends so. */
const STAFF_NUMBER = /\s*\(\d+\)$/;
/** The customer's name in a conversation when they give none and have no profile. */
const DEFAULT_CUSTOMER_NAME = 'Customer';
/** Conversation rooms: <prefix>.+<org key>.c+<room key>; `+` never appears in another org node. */
const CONVERSATION_MARKER = 'c+';
const CONVERSATION_NODE = /^([a-z0-9]+)\.\+([a-z0-9]{12})\.c\+([a-z0-9]{10})(?:\/(.*))?$/s;

const refused = (message: string, code: string) => new ServiceError('permission_error', message, { code });
const conflict = (message: string, code: string) => new ServiceError('conflict', message, { code });
/** A code nobody has, and one the caller may not see, answer alike. */
const codeNotFound = () => new ServiceError('not_found', 'No one has this code', { code: 'CODE_NOT_FOUND' });
const businessNotFound = () => errors.notFound('Business');
const personNotFound = () => errors.notFound('Person');

/** Who may do what (docs/businesses.md, "Roles and rights"). */
const RANK: Record<BusinessRole, number> = { staff: 0, admin: 1, owner: 2 };
const needRole = (role: BusinessRole | null, least: BusinessRole, what: string) => {
  if (role === null || RANK[role] < RANK[least])
    throw refused(
      `Only the business’s ${least === 'owner' ? 'owner' : least === 'admin' ? 'owner and admins' : 'team'} may ${what}`,
      'BUSINESS_ROLE',
    );
};

/** A code: 8 characters of the alphabet, drawn uniformly. */
const drawCode = () =>
  Array.from({ length: CODE_LENGTH }, () => CODE_ALPHABET[randomInt(CODE_ALPHABET.length)]).join('');

/** A staff member's name in conversations: their title when names are shown, else the business's. */
export function staffNick(
  business: { name: string; staff_names: 'shown' | 'hidden' },
  staff: { title: string | null; number: number },
) {
  const name = business.staff_names === 'shown' && staff.title !== null ? staff.title : business.name;
  return `${name} (${staff.number})`;
}

export function createBusinessesService(deps: {
  pool: DatabasePool;
  clock: Clock;
  cursors: Cursors;
  orgs: OrgsService;
  realtime: RealtimeService;
  messaging: MessagingService;
  social: SocialService;
  ejabberd: EjabberdClient;
  chatDomain: string;
  mucDomain: string;
}) {
  const jid = (node: string) => `${node}@${deps.chatDomain}`;
  const roomJid = (node: string) => `${node}@${deps.mucDomain}`;
  const settingsOf = (principal: Principal) => deps.realtime.ensure(principal);
  const prefixOf = async (principal: Principal) => (await settingsOf(principal)).chat_prefix;

  // ----- names on the chat server ------------------------------------------------------------------

  const identityNode = (prefix: string, org: { chat_key: string }, identityKey: string) =>
    orgNode(prefix, org.chat_key, identityKey);
  const inboxNode = (prefix: string, org: { chat_key: string }) => orgNode(prefix, org.chat_key, INBOX_ROOM);
  const conversationPrefix = (prefix: string, org: { chat_key: string }) =>
    `${orgNodePrefix(prefix, org.chat_key)}${CONVERSATION_MARKER}`;
  const conversationNode = (prefix: string, org: { chat_key: string }, roomKey: string) =>
    `${conversationPrefix(prefix, org)}${roomKey}`;

  const staffPeople = (prefix: string, business: BusinessOrgRow, staff: readonly StaffRow[]): RoomPerson[] =>
    staff.map((row) => ({
      jid: jid(identityNode(prefix, business, row.identity_key)),
      nick: staffNick(business, row),
    }));

  /**
   * Member identities' bookmarks, replaced whole: the inbox's staff room if they work it, and their
   * groups. The bundle keeps these identities' bookmarks; nobody else writes them. Two statements and
   * one ejabberd call per thousand people, however many are named.
   */
  async function syncBookmarks(
    tx: Transaction,
    prefix: string,
    business: BusinessOrgRow,
    memberIds: readonly string[],
  ) {
    if (memberIds.length === 0) return;
    const store = businessStore(tx);
    const groups = new Map<string, { ext_id: string; name: string }[]>();
    for (const group of await store.groupsOf(memberIds))
      groups.set(group.member_id, [...(groups.get(group.member_id) ?? []), group]);
    await deps.ejabberd.setManyBookmarks(
      (await store.persons(business.id, memberIds)).map((person) => {
        const nick = person.title ?? person.display_name ?? business.name;
        const rooms: Bookmark[] = [
          ...(person.number === null
            ? []
            : [{ jid: roomJid(inboxNode(prefix, business)), name: business.inbox_name, nick }]),
          ...(groups.get(person.id) ?? []).map((group) => ({
            jid: roomJid(orgNode(prefix, business.chat_key, group.ext_id)),
            name: group.name,
            nick,
          })),
        ];
        return { user: identityNode(prefix, business, person.identity_key), rooms };
      }),
    );
  }

  /**
   * The inbox's staff on the chat server, before the commit (a failure undoes the change, 503): every
   * conversation room and the staff room brought to the staff as the database now has them (names
   * included), then the bookmarks of those who moved. ejabberd applies a state, not a change, so a
   * change that failed or was undone after it reached ejabberd is put right by the next one.
   */
  async function applyStaff(
    tx: Transaction,
    prefix: string,
    business: BusinessOrgRow,
    moved: readonly string[],
  ) {
    const store = businessStore(tx);
    const rooms = [
      ...(await store.conversationRoomKeys(business.id)).map((key) =>
        conversationNode(prefix, business, key),
      ),
      inboxNode(prefix, business),
    ];
    await deps.ejabberd.setConversationStaff(
      orgNodePrefix(prefix, business.chat_key),
      rooms,
      staffPeople(prefix, business, await store.staff(business.id)),
    );
    await syncBookmarks(tx, prefix, business, moved);
  }

  /** Adds one person to the inbox's staff (a new member: accepted, approved, the owner at the start). */
  async function joinInbox(
    tx: Transaction,
    principal: Principal,
    business: BusinessOrgRow,
    memberId: string,
  ) {
    const store = businessStore(tx);
    const staff = await store.staff(business.id);
    await store.replaceStaff(business.id, [
      ...staff.map((row) => ({ memberId: row.member_id, mayReply: row.may_reply })),
      { memberId, mayReply: true },
    ]);
    await applyStaff(tx, await prefixOf(principal), business, [memberId]);
  }

  /**
   * 409 when the user owns as many businesses as a user may; otherwise holds their count until the
   * transaction ends (one registration or hand-over to a user at a time).
   */
  async function mayOwnAnother(tx: Transaction, scope: Principal, userId: string) {
    const store = businessStore(tx);
    await store.lockOwner(scope, userId);
    if ((await store.ownedCount(scope, userId)) >= BUSINESS_LIMITS.businessesPerOwner)
      throw conflict(`A user owns at most ${BUSINESS_LIMITS.businessesPerOwner} businesses`, 'LIMIT_REACHED');
  }

  // ----- lookups -----------------------------------------------------------------------------------

  /**
   * The business the path names, with the caller's role: 404 if they are not on its team, 403 when
   * their role is below `least` (`what` says what they tried).
   */
  async function businessFor(
    db: Db,
    user: UserPrincipal,
    orgId: string,
    least: BusinessRole,
    what: string,
    lock?: 'update',
  ) {
    const business = await businessStore(db).business(user, orgId, user.userId, lock);
    if (!business || business.status === 'deleted' || business.my_role === null) throw businessNotFound();
    needRole(business.my_role, least, what);
    return business as BusinessOrgRow & { my_role: BusinessRole };
  }

  /**
   * A new person of the team (the owner, someone invited or asking), with an identity of their own:
   * their member id.
   */
  async function addPerson(
    tx: Transaction,
    business: Pick<BusinessOrgRow, 'id' | 'member_count'>,
    person: {
      userId: string;
      role: BusinessRole;
      title: string | null;
      status: 'active' | 'invited' | 'requested';
    },
  ) {
    if (business.member_count >= BUSINESS_LIMITS.teamPerBusiness)
      throw conflict(
        `A business’s team holds at most ${BUSINESS_LIMITS.teamPerBusiness} people`,
        'LIMIT_REACHED',
      );
    const id = newId('mem');
    await orgsStore(tx).createMember(
      { id, orgId: business.id, extId: id, ...person, identityKey: newNodeKey() },
      deps.clock.now(),
    );
    return id;
  }

  /** The app user with a personal code or a registered phone, or 404. */
  async function personBy(tx: Transaction, user: UserPrincipal, who: { code?: string; phone?: string }) {
    if ((who.code === undefined) === (who.phone === undefined))
      throw errors.invalidField('body', 'code', 'give exactly one of code and phone');
    const userId =
      who.code !== undefined
        ? ((await businessStore(tx).code(user, who.code.toUpperCase()))?.user_id ?? null)
        : await deps.messaging.userOfPhone(user, who.phone!);
    if (userId === null)
      throw new ServiceError('not_found', 'No one has this code or phone', { code: 'PERSON_NOT_FOUND' });
    return userId;
  }

  async function personOf(db: Db, business: BusinessOrgRow, memberId: string, lock?: 'update') {
    const person = await businessStore(db).person(business.id, memberId, lock);
    if (!person) throw personNotFound();
    return person;
  }

  /** A new code for a user or a business, drawn again while taken; a user who has one keeps it. */
  async function takeCode(tx: Transaction, scope: Principal, owner: { userId: string } | { orgId: string }) {
    const store = businessStore(tx);
    for (;;) {
      if (await store.insertCode(scope, drawCode(), owner, deps.clock.now())) return;
      if ('userId' in owner && (await store.codeOfUser(scope, owner.userId))) return;
    }
  }

  // ----- what callers see --------------------------------------------------------------------------

  const myCodeIn = async (tx: Transaction, user: UserPrincipal) => {
    const row = (await businessStore(tx).codeOfUser(user, user.userId))!;
    return { code: row.code, created_at: iso(row.created_at) };
  };

  const presentBusiness = (row: BusinessOrgRow & { my_role: BusinessRole }) => ({
    id: row.id,
    name: row.name,
    logo_url: row.logo_url,
    status: row.status === 'deleted' ? ('deleted' as const) : ('active' as const),
    code: row.code,
    access: row.access,
    calls: row.calls,
    chat: row.chat_enabled,
    front_desk: row.front_desk,
    greeting: row.greeting,
    staff_names: row.staff_names,
    inbox: { id: row.inbox_id, name: row.inbox_name, line: row.inbox_line },
    my_role: row.my_role,
    team_count: row.member_count,
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });

  const presentPerson = (business: BusinessOrgRow, row: PersonRow) => ({
    id: row.id,
    user_id: row.user_id!,
    role: row.role as BusinessRole,
    title: row.title,
    // A business's people are only ever these (circles have the other statuses).
    status: row.status as (typeof PERSON_STATUSES)[number],
    inbox:
      row.number === null
        ? null
        : {
            may_reply: row.may_reply!,
            nick: staffNick(business, { title: row.title, number: row.number }),
          },
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  });

  const presentInvite = (row: InviteRow) => ({
    id: row.id,
    kind: row.kind,
    org: { id: row.org_id, name: row.org_name, logo_url: row.org_logo_url },
    role: row.role,
    title: row.title,
    created_at: iso(row.created_at),
  });

  const presentInbox = (prefix: string, business: BusinessOrgRow, staff: readonly StaffRow[]) => ({
    id: business.inbox_id,
    name: business.inbox_name,
    line: business.inbox_line,
    jid: roomJid(inboxNode(prefix, business)),
    conversation_room_prefix: conversationPrefix(prefix, business),
    staff: staff.map((row) => ({
      member_id: row.member_id,
      may_reply: row.may_reply,
      nick: staffNick(business, row),
    })),
  });

  const presentConversation = (prefix: string, business: BusinessOrgRow, row: ConversationRow) => ({
    id: row.id,
    jid: roomJid(conversationNode(prefix, business, row.room_key)),
    customer_name: row.customer_name,
    opened_by: row.opened_by,
    created_at: iso(row.created_at),
    reopened_at: iso(row.reopened_at),
  });

  const peoplePage = async (
    business: BusinessOrgRow,
    query: { limit: number; cursor?: string; status?: (typeof PERSON_STATUSES)[number] },
  ) =>
    deps.cursors.page(
      await businessStore(deps.pool).people(
        business.id,
        query.status,
        query.limit,
        deps.cursors.decode(query.cursor),
      ),
      query.limit,
      (row) => presentPerson(business, row),
    );

  // ----- conversations -----------------------------------------------------------------------------

  /**
   * Opens (or reopens) the customer's conversation with the business: one room per customer, made
   * with the customer and the inbox's staff in it before the commit (a failure is a 503, nothing kept).
   */
  async function openConversation(
    tx: Transaction,
    principal: Principal,
    business: BusinessOrgRow,
    customer: { userId: string; name: string },
    openedBy: 'customer' | 'business',
  ) {
    const store = businessStore(tx);
    const now = deps.clock.now();
    const existing = await store.conversation(business.id, customer.userId, 'update');
    const conversation =
      existing === null
        ? await store.createConversation({
            id: newId('conv'),
            org_id: business.id,
            user_id: customer.userId,
            room_key: newNodeKey(),
            customer_name: customer.name,
            opened_by: openedBy,
            created_at: now,
            reopened_at: now,
          })
        : await store.reopenConversation(existing.id, now, openedBy);
    // Another request made it first: that one is the conversation.
    const row = conversation ?? (await store.conversation(business.id, customer.userId, 'update'))!;
    const settings = await settingsOf(principal);
    const prefix = settings.chat_prefix;
    const room = conversationNode(prefix, business, row.room_key);
    await deps.ejabberd.openConversation(room, {
      title: business.inbox_name,
      description: business.inbox_line ?? '',
      subject: business.front_desk === 'greeting' ? (business.greeting ?? '') : '',
      maxUsers: settings.max_room_size,
      members: [
        { jid: jid(scopedNode(prefix, customer.userId)), nick: row.customer_name },
        ...staffPeople(prefix, business, await store.staff(business.id)),
      ],
    });
    return {
      kind: 'business' as const,
      jid: roomJid(room),
      conversation_id: row.id,
      created: existing === null && conversation !== null,
    };
  }

  /** The customer's name: given, else their profile's, else "Customer". */
  async function customerName(db: Db, principal: Principal, userId: string, given?: string) {
    // Compared as ejabberd prepares nicknames: "（3）" in full width is "(3)" to it.
    if (given !== undefined) {
      if (STAFF_NUMBER.test(prepared(given)))
        throw errors.invalidField('body', 'name', 'must not end like a staff name, as in "Acme (3)"');
      return given;
    }
    // A profile's name is free text: one ending like a staff name (" (3)") loses that ending.
    const profileName = prepared((await deps.social.displayNameOf(principal, userId, db)) ?? '').replace(
      STAFF_NUMBER,
      '',
    );
    return profileName || DEFAULT_CUSTOMER_NAME;
  }

  /** Whether the user may start a chat with the business now, or why not. */
  async function chatRefusal(tx: Db, user: UserPrincipal, business: BusinessOrgRow) {
    if (!business.chat_enabled || business.status !== 'active') return 'chat_off' as const;
    if (business.access === 'nobody') return 'access_nobody' as const;
    if (
      business.access === 'invited' &&
      (await businessStore(tx).conversation(business.id, user.userId))?.opened_by !== 'business'
    )
      return 'access_invited' as const;
    return null;
  }

  /**
   * The business or member a code names, as the caller may see it (404 CODE_NOT_FOUND otherwise); a
   * business read with the lock asked for.
   */
  async function resolveCode(db: Db, user: UserPrincipal, code: string, lock?: 'update' | 'share') {
    const row = await businessStore(db).code(user, code.toUpperCase());
    if (!row) throw codeNotFound();
    if (row.user_id !== null) return { kind: 'member' as const, code: row.code, userId: row.user_id };
    const business = await businessStore(db).business(user, row.org_id!, user.userId, lock);
    if (business?.status !== 'active') throw codeNotFound();
    return { kind: 'business' as const, code: row.code, business };
  }

  return {
    // ----- for circles (circles.ts): codes and people found by code or phone -------------------------

    personBy,
    /** A new code for an org (a circle's), drawn again while taken. */
    newOrgCode: (tx: Transaction, scope: Principal, orgId: string) => takeCode(tx, scope, { orgId }),

    // ----- the user's own code ---------------------------------------------------------------------

    /** The user's personal code, made on first read (takeCode keeps one that exists). */
    myCode: (user: UserPrincipal) =>
      inTransaction(deps.pool, async (tx) => {
        await takeCode(tx, user, { userId: user.userId });
        return myCodeIn(tx, user);
      }),

    /** A new personal code: the old one finds nobody from now on. */
    newMyCode: async (user: UserPrincipal, tx: Transaction) => {
      await businessStore(tx).deleteCodeOfUser(user, user.userId);
      await takeCode(tx, user, { userId: user.userId });
      return myCodeIn(tx, user);
    },

    lookupCode: async (user: UserPrincipal, code: string) => {
      const found = await resolveCode(deps.pool, user, code);
      if (found.kind === 'member')
        return {
          code: found.code,
          kind: 'member' as const,
          name: await deps.social.displayNameOf(user, found.userId),
          may_message: found.userId !== user.userId,
          reason: found.userId === user.userId ? ('own_code' as const) : null,
          business: null,
          circle: null,
        };
      const { business } = found;
      const reason = await chatRefusal(deps.pool, user, business);
      return {
        code: found.code,
        kind: 'business' as const,
        name: business.name,
        may_message: reason === null,
        reason,
        business: {
          id: business.id,
          logo_url: business.logo_url,
          inbox: { name: business.inbox_name, line: business.inbox_line },
        },
        circle: null,
      };
    },

    /** Starts or reopens a chat: a business's conversation room, or a member's personal address. */
    startChat: async (user: UserPrincipal, code: string, input: { name?: string }, tx: Transaction) => {
      const found = await resolveCode(tx, user, code, 'share');
      if (found.kind === 'member') {
        if (found.userId === user.userId) throw conflict('This is your own code', 'OWN_CODE');
        const prefix = await prefixOf(user);
        return {
          kind: 'member' as const,
          jid: jid(scopedNode(prefix, found.userId)),
          conversation_id: null,
          created: false,
        };
      }
      const { business } = found;
      const reason = await chatRefusal(tx, user, business);
      if (reason === 'chat_off') throw refused('This business’s chat is off', 'BUSINESS_CHAT_OFF');
      if (reason === 'access_nobody') throw refused('This business takes no new chats', 'BUSINESS_ACCESS');
      if (reason === 'access_invited')
        throw refused('This business takes chats only from customers it invited', 'BUSINESS_ACCESS');
      return openConversation(
        tx,
        user,
        business,
        { userId: user.userId, name: await customerName(tx, user, user.userId, input.name) },
        'customer',
      );
    },

    /** Asks to join a business's team by its code (a join request), or answers that one is on it. */
    joinByCode: async (user: UserPrincipal, code: string, tx: Transaction) => {
      const found = await resolveCode(tx, user, code, 'update');
      // Circles join by code too (their own issue); a member's code is nothing to join.
      if (found.kind !== 'business') throw codeNotFound();
      const { business } = found;
      const joined = { kind: 'business' as const, org_id: business.id };
      const store = businessStore(tx);
      const existing = await store.personOfUser(business.id, user.userId);
      if (existing?.status === 'active' || existing?.status === 'disabled')
        return { status: 'member' as const, ...joined, member_id: existing.id };
      if (existing?.status === 'requested')
        return { status: 'requested' as const, ...joined, member_id: existing.id };
      if (existing?.status === 'invited') {
        // Invited and asking: that is an accept.
        await acceptPerson(tx, user, business, existing.id);
        return { status: 'member' as const, ...joined, member_id: existing.id };
      }
      const id = await addPerson(tx, business, {
        userId: user.userId,
        role: 'staff',
        title: null,
        status: 'requested',
      });
      // Asking is what lets a business that was declined reach the person again.
      await store.forgetRefusal(business.id, user.userId);
      return { status: 'requested' as const, ...joined, member_id: id };
    },

    // ----- invites -----------------------------------------------------------------------------------

    myInvites: async (user: UserPrincipal, query: { limit: number; cursor?: string }) =>
      deps.cursors.page(
        await businessStore(deps.pool).invitesOf(
          user,
          user.userId,
          query.limit,
          deps.cursors.decode(query.cursor),
        ),
        query.limit,
        presentInvite,
      ),

    acceptInvite: async (user: UserPrincipal, inviteId: string, tx: Transaction) => {
      const invite = await businessStore(tx).inviteOf(user, user.userId, inviteId);
      if (!invite) throw errors.notFound('Invite');
      const business = (await businessStore(tx).business(user, invite.org_id, user.userId))!;
      await acceptPerson(tx, user, business, invite.id);
      return { id: invite.id, status: 'accepted' as const, member_id: invite.id };
    },

    /** Declines: the business can no longer invite the user or open a chat with them, until they ask. */
    declineInvite: async (user: UserPrincipal, inviteId: string, tx: Transaction) => {
      const invite = await businessStore(tx).inviteOf(user, user.userId, inviteId);
      if (!invite) throw errors.notFound('Invite');
      await orgsStore(tx).deleteMember(invite.id);
      await businessStore(tx).refuse(invite.org_id, user.userId, deps.clock.now());
      return { id: invite.id, status: 'declined' as const, member_id: null };
    },

    // ----- businesses --------------------------------------------------------------------------------

    register: async (
      user: UserPrincipal,
      input: {
        name: string;
        logo_url?: string;
        access?: BusinessOrgRow['access'];
        calls?: boolean;
        front_desk?: BusinessOrgRow['front_desk'];
        greeting?: string;
        staff_names?: BusinessOrgRow['staff_names'];
        inbox_name?: string;
        inbox_line?: string;
      },
      tx: Transaction,
    ) => {
      const frontDesk = input.front_desk ?? 'staff';
      if (frontDesk === 'greeting' && input.greeting === undefined)
        throw errors.invalidField('body', 'greeting', 'is required when front_desk is greeting');
      const store = businessStore(tx);
      await mayOwnAnother(tx, user, user.userId);
      const now = deps.clock.now();
      const id = newId('org');
      const org = await orgsStore(tx).createOrg(user, {
        id,
        externalId: id,
        kind: 'business',
        chatKey: newChatKey(),
        name: input.name,
        logoUrl: input.logo_url ?? null,
        policy: 'anyone',
        chatEnabled: true,
        at: now,
      });
      await store.createBusiness({
        org_id: id,
        access: input.access ?? 'code',
        calls: input.calls ?? true,
        front_desk: frontDesk,
        greeting: input.greeting ?? null,
        staff_names: input.staff_names ?? 'hidden',
        inbox_id: newId('inb'),
        inbox_name: input.inbox_name ?? input.name,
        inbox_line: input.inbox_line ?? null,
      });
      await takeCode(tx, user, { orgId: id });
      const ownerId = await addPerson(tx, org, {
        userId: user.userId,
        role: 'owner',
        title: null,
        status: 'active',
      });
      const business = await businessFor(tx, user, id, 'owner', 'register it');
      const settings = await settingsOf(user);
      // The staff are its members and subscribers, as in every conversation room.
      await deps.ejabberd.ensureRoom(inboxNode(settings.chat_prefix, org), {
        ...INBOX_ROOM_SHAPE,
        maxUsers: settings.max_room_size,
      });
      await joinInbox(tx, user, business, ownerId);
      return presentBusiness(business);
    },

    listMine: async (user: UserPrincipal, query: { limit: number; cursor?: string }) =>
      deps.cursors.page(
        await businessStore(deps.pool).businessesOf(
          user,
          user.userId,
          query.limit,
          deps.cursors.decode(query.cursor),
        ),
        query.limit,
        (row) => presentBusiness(row as BusinessOrgRow & { my_role: BusinessRole }),
      ),

    getBusiness: async (user: UserPrincipal, orgId: string) => {
      const business = await businessFor(deps.pool, user, orgId, 'admin', 'read its settings and people');
      return { ...presentBusiness(business), people: await peoplePage(business, { limit: EMBEDDED_PEOPLE }) };
    },

    people: async (
      user: UserPrincipal,
      orgId: string,
      query: { limit: number; cursor?: string; status?: (typeof PERSON_STATUSES)[number] },
    ) => {
      const business = await businessFor(deps.pool, user, orgId, 'admin', 'list its people');
      return peoplePage(business, query);
    },

    changeBusiness: async (
      user: UserPrincipal,
      orgId: string,
      input: {
        name?: string;
        logo_url?: string | null;
        access?: BusinessOrgRow['access'];
        calls?: boolean;
        front_desk?: BusinessOrgRow['front_desk'];
        greeting?: string | null;
        staff_names?: BusinessOrgRow['staff_names'];
        chat?: boolean;
        new_code?: true;
      },
      tx: Transaction,
    ) => {
      const business = await businessFor(tx, user, orgId, 'admin', 'change it', 'update');
      const frontDesk = input.front_desk ?? business.front_desk;
      const greeting = input.greeting === undefined ? business.greeting : input.greeting;
      if (frontDesk === 'greeting' && greeting === null)
        throw errors.invalidField('body', 'greeting', 'is required while front_desk is greeting');
      const now = deps.clock.now();
      const org = await orgsStore(tx).updateOrg(
        business.id,
        {
          ...(input.name === undefined ? {} : { name: input.name }),
          ...(input.logo_url === undefined ? {} : { logoUrl: input.logo_url }),
          ...(input.chat === undefined ? {} : { chatEnabled: input.chat }),
        },
        now,
      );
      const changes: BusinessChanges = {
        ...(input.access === undefined ? {} : { access: input.access }),
        ...(input.calls === undefined ? {} : { calls: input.calls }),
        ...(input.front_desk === undefined ? {} : { frontDesk: input.front_desk }),
        ...(input.greeting === undefined ? {} : { greeting: input.greeting }),
        ...(input.staff_names === undefined ? {} : { staffNames: input.staff_names }),
      };
      await businessStore(tx).updateBusiness(business.id, changes);
      if (input.new_code) {
        await businessStore(tx).deleteCodeOfOrg(business.id);
        await takeCode(tx, user, { orgId: business.id });
      }
      const after = await businessFor(tx, user, business.id, 'admin', 'change it');
      // The staff's names in conversations follow the business's name and whether names are shown.
      if (after.name !== business.name || after.staff_names !== business.staff_names)
        await applyStaff(tx, await prefixOf(user), after, []);
      if (!org.chat_enabled) deps.orgs.everyIdentityRevoked(tx, user, org);
      else if (input.calls === false) deps.orgs.callsEnded(tx, org);
      deps.orgs.reachChanged(tx, org);
      return presentBusiness(after);
    },

    deleteBusiness: async (user: UserPrincipal, orgId: string, tx: Transaction) => {
      const business = await businessFor(tx, user, orgId, 'owner', 'delete it', 'update');
      const org = await orgsStore(tx).deleteOrg(business.id, deps.clock.now());
      await businessStore(tx).deleteCodeOfOrg(business.id);
      deps.orgs.everyIdentityRevoked(tx, user, org);
      deps.orgs.reachChanged(tx, org);
      return { ok: true as const, id: business.id };
    },

    // ----- shortcuts ---------------------------------------------------------------------------------

    shortcuts: async (user: UserPrincipal, orgId: string) => {
      const business = await businessFor(deps.pool, user, orgId, 'admin', 'read its shortcuts');
      return { shortcuts: business.shortcuts };
    },

    putShortcuts: async (
      user: UserPrincipal,
      orgId: string,
      input: { shortcuts: { key: string; text: string }[] },
      tx: Transaction,
    ) => {
      const business = await businessFor(tx, user, orgId, 'admin', 'change its shortcuts', 'update');
      const seen = new Map<string, number>();
      input.shortcuts.forEach((shortcut, index) => {
        const key = shortcut.key.toLowerCase();
        if (seen.has(key))
          throw errors.invalidField(
            'body',
            `shortcuts.${index}.key`,
            `repeats shortcuts.${seen.get(key)}.key (keys are compared in any case)`,
          );
        seen.set(key, index);
      });
      await businessStore(tx).updateBusiness(business.id, { shortcuts: input.shortcuts });
      return { shortcuts: input.shortcuts };
    },

    // ----- the inbox ---------------------------------------------------------------------------------

    inboxes: async (user: UserPrincipal, orgId: string) => {
      const business = await businessFor(deps.pool, user, orgId, 'admin', 'read its public chat');
      const staff = await businessStore(deps.pool).staff(business.id);
      return { items: [presentInbox(await prefixOf(user), business, staff)], next_cursor: null };
    },

    changeInbox: async (
      user: UserPrincipal,
      orgId: string,
      inboxId: string,
      input: { name?: string; line?: string | null },
      tx: Transaction,
    ) => {
      const business = await businessFor(tx, user, orgId, 'admin', 'change its public chat', 'update');
      if (inboxId !== business.inbox_id) throw errors.notFound('Inbox');
      await businessStore(tx).updateBusiness(business.id, {
        ...(input.name === undefined ? {} : { inboxName: input.name }),
        ...(input.line === undefined ? {} : { inboxLine: input.line }),
      });
      const line = input.line === undefined ? business.inbox_line : input.line;
      // Every conversation room shows the new name and line, before the commit (503 undoes it).
      const prefix = await prefixOf(user);
      await deps.ejabberd.setConversationTitles(
        (await businessStore(tx).conversationRoomKeys(business.id)).map((key) =>
          conversationNode(prefix, business, key),
        ),
        input.name ?? business.inbox_name,
        line ?? '',
      );
      return { id: business.inbox_id, name: input.name ?? business.inbox_name, line };
    },

    /** Who works the inbox and who may reply, applied to every conversation room at once. */
    putStaff: async (
      user: UserPrincipal,
      orgId: string,
      inboxId: string,
      input: { staff: { member_id: string; may_reply: boolean }[] },
      tx: Transaction,
    ) => {
      const business = await businessFor(
        tx,
        user,
        orgId,
        'admin',
        'choose who works its public chat',
        'update',
      );
      if (inboxId !== business.inbox_id) throw errors.notFound('Inbox');
      const ids = input.staff.map((entry) => entry.member_id);
      // A disabled person keeps their place (and number) for their restore.
      const onTeam = new Set(
        (await businessStore(tx).peopleAmong(business.id, ids, ['active', 'disabled'])).map((row) => row.id),
      );
      const fields = input.staff.flatMap((entry, index) => [
        ...(onTeam.has(entry.member_id)
          ? []
          : [
              {
                in: 'body' as const,
                field: `staff.${index}.member_id`,
                message: 'names nobody on the team (active or disabled)',
              },
            ]),
        ...(ids.indexOf(entry.member_id) === index
          ? []
          : [{ in: 'body' as const, field: `staff.${index}.member_id`, message: 'is named twice' }]),
      ]);
      if (fields.length > 0) throw errors.validation(fields);
      const store = businessStore(tx);
      const before = await store.staff(business.id);
      await store.replaceStaff(
        business.id,
        input.staff.map((entry) => ({ memberId: entry.member_id, mayReply: entry.may_reply })),
      );
      const after = await store.staff(business.id);
      const stayed = new Set(after.map((row) => row.member_id));
      const was = new Set(before.map((row) => row.member_id));
      const prefix = await prefixOf(user);
      // Bookmarks change for those who joined or left the inbox.
      await applyStaff(tx, prefix, business, [
        ...after.filter((row) => !was.has(row.member_id)).map((row) => row.member_id),
        ...before.filter((row) => !stayed.has(row.member_id)).map((row) => row.member_id),
      ]);
      // Who may reply is asked by ejabberd: it forgets its answers.
      deps.orgs.reachChanged(tx, business);
      return presentInbox(prefix, business, after);
    },

    /** The inbox's conversations, for anyone who works it. */
    conversations: async (user: UserPrincipal, orgId: string, query: { limit: number; cursor?: string }) => {
      const business = await businessFor(deps.pool, user, orgId, 'staff', 'list its conversations');
      const me = (await businessStore(deps.pool).personOfUser(business.id, user.userId))!;
      if (me.number === null && RANK[business.my_role] < RANK.admin)
        throw refused(
          'Only the staff who work the public chat, the owner and admins may list its conversations',
          'BUSINESS_ROLE',
        );
      const prefix = await prefixOf(user);
      return deps.cursors.page(
        await businessStore(deps.pool).conversations(
          business.id,
          query.limit,
          deps.cursors.decode(query.cursor),
        ),
        query.limit,
        (row) => presentConversation(prefix, business, row),
      );
    },

    /** The business opens a chat with a person (access invited lets only these customers in). */
    openWithCustomer: async (
      user: UserPrincipal,
      orgId: string,
      input: { code?: string; phone?: string },
      tx: Transaction,
    ) => {
      const business = await businessFor(tx, user, orgId, 'admin', 'open a chat with a customer', 'update');
      if (!business.chat_enabled) throw refused('This business’s chat is off', 'BUSINESS_CHAT_OFF');
      const userId = await personBy(tx, user, input);
      if (await businessStore(tx).refused(business.id, userId))
        throw refused(
          'This person declined this business: it cannot reach them unless they ask',
          'PERSON_DECLINED',
        );
      const name = await customerName(tx, user, userId);
      return openConversation(tx, user, business, { userId, name }, 'business');
    },

    // ----- the team ----------------------------------------------------------------------------------

    invite: async (
      user: UserPrincipal,
      orgId: string,
      input: { code?: string; phone?: string; role?: 'admin' | 'staff'; title?: string },
      tx: Transaction,
    ) => {
      const business = await businessFor(tx, user, orgId, 'admin', 'invite people', 'update');
      const role = input.role ?? 'staff';
      if (role === 'admin') needRole(business.my_role, 'owner', 'invite admins');
      const userId = await personBy(tx, user, input);
      const store = businessStore(tx);
      if (await store.refused(business.id, userId))
        throw refused(
          'This person declined this business’s invite: it cannot invite them again unless they ask to join',
          'PERSON_DECLINED',
        );
      const existing = await store.personOfUser(business.id, userId);
      if (existing?.status === 'requested') {
        // They asked: inviting them is approving.
        await orgsStore(tx).updateMember(existing.id, { role, title: input.title ?? null }, deps.clock.now());
        await acceptPerson(tx, user, business, existing.id);
        return presentPerson(business, (await store.person(business.id, existing.id))!);
      }
      if (existing) throw conflict('This person is on the team or invited already', 'ALREADY_ON_TEAM');
      const id = await addPerson(tx, business, {
        userId,
        role,
        title: input.title ?? null,
        status: 'invited',
      });
      return presentPerson(business, (await store.person(business.id, id))!);
    },

    requests: async (user: UserPrincipal, orgId: string, query: { limit: number; cursor?: string }) => {
      const business = await businessFor(deps.pool, user, orgId, 'admin', 'see its join requests');
      return peoplePage(business, { ...query, status: 'requested' });
    },

    approve: async (user: UserPrincipal, orgId: string, memberId: string, tx: Transaction) => {
      const business = await businessFor(tx, user, orgId, 'admin', 'approve join requests', 'update');
      const person = await personOf(tx, business, memberId, 'update');
      if (person.status !== 'requested') throw errors.notFound('Join request');
      await acceptPerson(tx, user, business, person.id);
      return presentPerson(business, (await businessStore(tx).person(business.id, person.id))!);
    },

    reject: async (user: UserPrincipal, orgId: string, memberId: string, tx: Transaction) => {
      const business = await businessFor(tx, user, orgId, 'admin', 'turn join requests down', 'update');
      const person = await personOf(tx, business, memberId, 'update');
      if (person.status !== 'requested') throw errors.notFound('Join request');
      await orgsStore(tx).deleteMember(person.id);
      return { ok: true as const, id: person.id };
    },

    changePerson: async (
      user: UserPrincipal,
      orgId: string,
      memberId: string,
      input: { role?: BusinessRole; title?: string | null; status?: 'active' | 'disabled' },
      tx: Transaction,
    ) => {
      const business = await businessFor(tx, user, orgId, 'admin', 'change its people', 'update');
      const person = await personOf(tx, business, memberId, 'update');
      const theirs = person.role as BusinessRole;
      // Admins manage staff; only the owner manages admins, and nobody changes the owner but by a handover.
      if (theirs !== 'staff')
        needRole(business.my_role, 'owner', `change ${theirs === 'owner' ? 'the owner' : 'an admin'}`);
      if (input.role !== undefined && input.role !== 'staff')
        needRole(business.my_role, 'owner', `make someone ${input.role}`);
      if (theirs === 'owner' && (input.role !== undefined || input.status === 'disabled'))
        throw conflict('The owner hands the business over by making someone else owner', 'OWNER_STAYS');
      if (input.status !== undefined && (person.status === 'invited' || person.status === 'requested'))
        throw conflict('Only people on the team are disabled or restored', 'NOT_ON_TEAM');
      if (input.role === 'owner' && person.status !== 'active')
        throw conflict('Only an active person of the team becomes owner', 'NOT_ON_TEAM');
      if (input.role === 'owner' && input.status !== undefined)
        throw errors.invalidField('body', 'status', 'a hand-over (role owner) changes no status');
      const now = deps.clock.now();
      if (input.role === 'owner') {
        await mayOwnAnother(tx, user, person.user_id!);
        const me = (await businessStore(tx).personOfUser(business.id, user.userId))!;
        await businessStore(tx).setRole(me.id, 'admin', now);
      }
      await orgsStore(tx).updateMember(
        person.id,
        {
          ...(input.role === undefined ? {} : { role: input.role }),
          ...(input.title === undefined ? {} : { title: input.title }),
          ...(input.status === undefined ? {} : { status: input.status }),
        },
        now,
      );
      const after = (await businessStore(tx).person(business.id, person.id))!;
      // Their name in conversations follows their title (when names are shown).
      if (after.number !== null && after.title !== person.title)
        await applyStaff(tx, await prefixOf(user), business, []);
      if (input.status === 'disabled' && person.status === 'active')
        await deps.orgs.identityRevoked(tx, user, business, person.identity_key);
      deps.orgs.reachChanged(tx, business);
      return presentPerson(business, after);
    },

    /** Removes a person (or cancels an invite): no chat for this business by any route. */
    removePerson: async (user: UserPrincipal, orgId: string, memberId: string, tx: Transaction) => {
      // Anyone on the team may leave; the rest is for the owner and admins (below).
      const business = await businessFor(tx, user, orgId, 'staff', 'leave it', 'update');
      const person = await personOf(tx, business, memberId, 'update');
      const self = person.user_id === user.userId;
      if (!self) needRole(business.my_role, 'admin', 'remove people');
      if (person.role === 'owner')
        throw conflict('The owner cannot be removed: hand the business over first', 'OWNER_STAYS');
      if (!self && person.role === 'admin') needRole(business.my_role, 'owner', 'remove an admin');
      const groups = await businessStore(tx).groupsOf([person.id]);
      await orgsStore(tx).deleteMember(person.id);
      if (person.status === 'active' || person.status === 'disabled') {
        const prefix = await prefixOf(user);
        if (person.number !== null) await applyStaff(tx, prefix, business, []);
        const identity = jid(identityNode(prefix, business, person.identity_key));
        await deps.ejabberd.setRoomPlaces(
          groups.map((group) => ({
            room: orgNode(prefix, business.chat_key, group.ext_id),
            jid: identity,
            place: 'none' as const,
          })),
        );
        await deps.orgs.identityRevoked(tx, user, business, person.identity_key);
        deps.orgs.reachChanged(tx, business);
      }
      return { ok: true as const, id: person.id };
    },

    /** A members-only group chat of team members, made by any of them. */
    createGroup: async (
      user: UserPrincipal,
      orgId: string,
      input: { name: string; members: string[] },
      tx: Transaction,
    ) => {
      const business = await businessFor(tx, user, orgId, 'staff', 'make groups', 'update');
      if (business.team_count >= BUSINESS_LIMITS.groupsPerBusiness)
        throw conflict(
          `A business holds at most ${BUSINESS_LIMITS.groupsPerBusiness} groups`,
          'LIMIT_REACHED',
        );
      const me = (await businessStore(tx).personOfUser(business.id, user.userId))!;
      const active = new Set(
        (await businessStore(tx).peopleAmong(business.id, input.members, ['active'])).map((row) => row.id),
      );
      const missing = input.members.flatMap((id, index) =>
        active.has(id)
          ? []
          : [
              {
                in: 'body' as const,
                field: `members.${index}`,
                message: 'names no active person of the team',
              },
            ],
      );
      if (missing.length > 0) throw errors.validation(missing);
      const memberIds = [me.id, ...input.members.filter((id) => id !== me.id)];
      const now = deps.clock.now();
      const groupId = newId('grp');
      const team = await orgsStore(tx).createTeam(
        { id: newId('team'), orgId: business.id, extId: groupId, name: input.name },
        now,
      );
      await businessStore(tx).addToTeam(team.id, memberIds);
      const settings = await settingsOf(user);
      const room = orgNode(settings.chat_prefix, business.chat_key, groupId);
      await deps.ejabberd.ensureRoom(room, { ...TEAM_ROOM_SHAPE, maxUsers: settings.max_room_size });
      const people = await businessStore(tx).peopleAmong(business.id, memberIds, ['active']);
      await deps.ejabberd.setRoomPlaces(
        people.map((person) => ({
          room,
          jid: jid(identityNode(settings.chat_prefix, business, person.identity_key)),
          place: 'member' as const,
        })),
      );
      await syncBookmarks(
        tx,
        settings.chat_prefix,
        business,
        people.map((person) => person.id),
      );
      deps.orgs.reachChanged(tx, business);
      return { id: groupId, name: input.name, jid: roomJid(room), members: memberIds, created_at: iso(now) };
    },

    // ----- the chat server's question ----------------------------------------------------------------

    /**
     * mod_svc_scope's question (cached a minute per pair, forgotten on any change of the business):
     * may `from` post in a conversation room (`to`), or enter it under a nickname (`to` is
     * `<room>/<nick>`)? The customer posts while the business's chat is on, and enters under the
     * name they opened it with; the staff who work the inbox post if they may reply, and enter only
     * under their name there. Anything else is an org question.
     */
    mayReach: async (from: string, to: string): Promise<boolean> => {
      const room = CONVERSATION_NODE.exec(to);
      if (!room) return deps.orgs.mayReach(from, to);
      const [, prefix, chatKey, roomKey, nick] = room;
      const store = businessStore(deps.pool);
      const business = await store.businessByChatKey(chatKey!);
      if (business?.status !== 'active' || !business.chat_enabled) return false;
      const conversation = await store.conversationByRoomKey(business.id, roomKey!);
      if (!conversation) return false;
      const sender = parseOrgNode(from);
      if (sender === null) {
        // The customer: their personal node, and only their conversation's.
        const customer = parseScopedNode(from);
        return (
          customer !== null &&
          customer.prefix === prefix &&
          customer.id === conversation.user_id &&
          (nick === undefined || sameNick(nick, conversation.customer_name))
        );
      }
      if (sender.chatKey !== chatKey || sender.prefix !== prefix) return false;
      const member = await orgsStore(deps.pool).memberByIdentityKey(business.id, sender.name);
      if (member?.status !== 'active') return false;
      const staff = await store.staffMember(member.id);
      if (!staff) return false;
      if (nick === undefined) return staff.may_reply;
      return sameNick(nick, staffNick(business, staff));
    },
  };

  /** An invited or asking person joins the team: active, in the inbox, its rooms in their chat. */
  async function acceptPerson(
    tx: Transaction,
    principal: Principal,
    business: BusinessOrgRow,
    memberId: string,
  ) {
    await orgsStore(tx).updateMember(memberId, { status: 'active' }, deps.clock.now());
    await businessStore(tx).forgetRefusal(
      business.id,
      (await businessStore(tx).person(business.id, memberId))!.user_id!,
    );
    await joinInbox(tx, principal, business, memberId);
    deps.orgs.reachChanged(tx, business);
  }
}

export type BusinessesService = ReturnType<typeof createBusinessesService>;
