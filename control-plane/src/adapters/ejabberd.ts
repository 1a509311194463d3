import { xml } from '@xmpp/component';
import { UpstreamError } from '../platform/errors.js';
/**
 * A command of ejabberd's HTTP API that did not succeed, or could not reach it (HTTP status 0): a 503
 * to retry, its details logged only.
 */
export class EjabberdError extends UpstreamError {
  override name = 'EjabberdError';
  constructor(
    readonly command: string,
    readonly httpStatus: number,
    readonly answer: string,
  ) {
    super('ejabberd', `${command} failed (${httpStatus}): ${answer}`);
  }
}

export interface RoomOptions {
  maxUsers: number;
  /**
   * true: only members (affiliation member or above) enter; false: anyone who reaches the room
   * (mod_svc_scope decides who does). Either way no private messages between occupants, and no
   * moderation (its stored roles would outlive affiliations).
   */
  membersOnly?: boolean;
  /** Members may be subscribed (MUC/Sub): they receive its messages without joining. */
  subscriptions?: true;
  /** The name clients show. */
  title?: string;
  /** Every occupant sees the others' real JIDs (a circle's members map them to its member list). */
  showJids?: true;
  /**
   * Whose comings and goings the occupants see; none but moderators' on a board, whose thousands of
   * members would otherwise each tell every other one that they came.
   */
  presenceOf?: readonly ('moderator' | 'participant' | 'visitor')[];
}

/** What a room is made with besides its size, which follows the app's settings. */
export type RoomShape = Omit<RoomOptions, 'maxUsers'>;

/** Where a person is in a circle's room (ejabberd/svc_circles.erl). */
export interface RoomPlace {
  room: string;
  jid: string;
  /** member: affiliated; outcast: banned (sent out, refused on return); none: neither, and sent out. */
  place: 'member' | 'outcast' | 'none';
}

/** Someone in a room: their bare JID and their nickname there. */
export interface RoomPerson {
  jid: string;
  nick: string;
}

/** A room an account's chat client lists, and joins unless `autojoin` is false. */
export interface Bookmark {
  jid: string;
  name: string;
  nick: string;
  autojoin?: boolean;
}

/** Accounts whose bookmarks one svc_set_bookmarks call replaces (each request stays a few MB). */
const BOOKMARKS_PER_CALL = 1_000;

/**
 * A call that goes through thousands of rooms or accounts in ejabberd: a staff change or a rename of
 * a business's conversation rooms, bookmarks, room places, a new room size.
 */
const ROOM_WALK_TIMEOUT_MS = 60_000;
/** Rooms one svc_set_rooms_max_users call resizes: a few seconds of ejabberd's work a call. */
const ROOMS_PER_RESIZE = 1_000;

/** mod_http_api takes a list of {jid, nick} pairs as one JSON object. */
const personMap = (people: readonly RoomPerson[]) =>
  Object.fromEntries(people.map((person) => [person.jid, person.nick]));

/** XEP-0048 bookmarks as private XML storage keeps them. */
const bookmarkStorage = (rooms: readonly Bookmark[]) =>
  xml(
    'storage',
    { xmlns: 'storage:bookmarks' },
    ...rooms.map((room) =>
      xml(
        'conference',
        { jid: room.jid, name: room.name, autojoin: String(room.autojoin ?? true) },
        xml('nick', {}, room.nick),
      ),
    ),
  ).toString();

/** ejabberd's HTTP API account of the control plane (ejabberd.yml: api_permissions "control plane"). */
export const EJABBERD_API_USER = 'svc-api';

/**
 * The control plane's only client of ejabberd: mod_http_api on the internal network, as its own API
 * account (HTTP Basic, checked in process by ejabberd_auth_svc_api), which may run only the commands
 * called here.
 */
export function createEjabberdClient(options: {
  apiUrl: string;
  apiSecret: string;
  chatDomain: string;
  mucDomain: string;
}) {
  const base = options.apiUrl.replace(/\/$/, '');
  const authorization = `Basic ${Buffer.from(`${EJABBERD_API_USER}@${options.chatDomain}:${options.apiSecret}`).toString('base64')}`;

  async function call(command: string, body: Record<string, unknown>, timeoutMs = 5_000): Promise<unknown> {
    const response = await fetch(`${base}/${command}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    }).catch((error: Error) => {
      throw new EjabberdError(
        command,
        0,
        `${error.message}${error.cause ? ` (${String(error.cause)})` : ''}`,
      );
    });
    const text = await response.text();
    if (response.status !== 200) throw new EjabberdError(command, response.status, text.slice(0, 200));
    const result = text === '' ? null : JSON.parse(text);
    // A command whose result is a code answers 0 on success and 1 on failure, both with a 200.
    if (result === 1) throw new EjabberdError(command, response.status, 'the command failed (1)');
    return result;
  }

  /**
   * Room options as mod_muc_admin takes them (strings). Every room has MAM on: whether an app's
   * messages are stored is mod_svc_scope's archiving flag, so a room never falls back to answering
   * archive queries from its in-memory history.
   */
  const roomOptions = (room: RoomOptions) => [
    { name: 'max_users', value: String(room.maxUsers) },
    { name: 'mam', value: 'true' },
    ...(room.membersOnly === undefined
      ? []
      : [
          { name: 'members_only', value: String(room.membersOnly) },
          // A moderated room (mod_muc's default) remembers the role a user last had, and lets them
          // back in with it after their affiliation went: the role must come from the affiliation.
          { name: 'moderated', value: 'false' },
          // A private message through the room would be a 1:1 the org's policy never saw.
          { name: 'allow_private_messages', value: 'false' },
        ]),
    ...(room.subscriptions ? [{ name: 'allow_subscription', value: 'true' }] : []),
    ...(room.title === undefined ? [] : [{ name: 'title', value: room.title }]),
    ...(room.showJids ? [{ name: 'anonymous', value: 'false' }] : []),
    ...(room.presenceOf ? [{ name: 'presence_broadcast', value: `[${room.presenceOf.join(',')}]` }] : []),
  ];

  return {
    /** Creates the room, or brings an existing one to these options. */
    ensureRoom: async (name: string, room: RoomOptions): Promise<'created' | 'updated'> => {
      try {
        await call('create_room_with_opts', {
          name,
          service: options.mucDomain,
          host: options.chatDomain,
          options: [
            ...roomOptions(room),
            { name: 'persistent', value: 'true' },
            { name: 'public', value: 'false' },
            { name: 'public_list', value: 'false' },
            { name: 'allow_user_invites', value: 'false' },
          ],
        });
        return 'created';
      } catch (error) {
        if (!(error instanceof EjabberdError && /already exists/i.test(error.answer))) throw error;
      }
      for (const option of roomOptions(room)) {
        await call('change_room_option', {
          name,
          service: options.mucDomain,
          option: option.name,
          value: option.value,
        });
      }
      return 'updated';
    },

    /**
     * Closes every open session of a user whose credential was just deleted, and any login that
     * passed its password check before the deletion (mod_svc_scope); returns how many sessions it
     * closed.
     */
    revokeUser: async (user: string): Promise<number> => {
      const result = (await call('svc_revoke_user', { user, host: options.chatDomain })) as {
        sessions_closed: number;
      };
      return result.sessions_closed;
    },

    /**
     * Closes the sessions of every identity whose local part starts with the org's node prefix, and
     * any of their logins that passed its password check before (mod_svc_scope).
     */
    revokePrefix: async (prefix: string): Promise<number> => {
      const result = (await call('svc_revoke_prefix', { prefix, host: options.chatDomain })) as {
        sessions_closed: number;
      };
      return result.sessions_closed;
    },

    /** Makes every node forget its cached answers about who may reach whom in the org. */
    flushOrg: async (key: string): Promise<void> => {
      await call('svc_flush_org', { key });
    },

    /**
     * Makes a business's conversation room with its people (each a member, and subscribed under their
     * nickname), or brings them back into it when it exists (ejabberd/svc_conversations.erl).
     */
    openConversation: async (
      room: string,
      setup: {
        title: string;
        description: string;
        /** Empty for none. */
        subject: string;
        maxUsers: number;
        members: readonly RoomPerson[];
      },
    ): Promise<void> => {
      await call('svc_open_conversation', {
        name: room,
        service: options.mucDomain,
        title: setup.title,
        description: setup.description,
        subject: setup.subject,
        max_users: setup.maxUsers,
        members: personMap(setup.members),
      });
    },

    /**
     * Brings a business's rooms (its conversation rooms and its staff room) to its inbox's staff:
     * `members` are members and subscribers under their nickname, and no other identity of the
     * business (its node starts with `orgPrefix`) is either. A state, so a failed or undone call is
     * put right by the next. Thousands of rooms take seconds, hence the longer wait.
     */
    setConversationStaff: async (
      orgPrefix: string,
      rooms: readonly string[],
      members: readonly RoomPerson[],
    ): Promise<number> => {
      const result = (await call(
        'svc_set_conversation_staff',
        { prefix: orgPrefix, service: options.mucDomain, rooms, members: personMap(members) },
        ROOM_WALK_TIMEOUT_MS,
      )) as { rooms: number };
      return result.rooms;
    },

    /** Gives a business's conversation rooms its public chat's name and line. */
    setConversationTitles: async (
      rooms: readonly string[],
      title: string,
      description: string,
    ): Promise<number> => {
      const result = (await call(
        'svc_set_conversation_titles',
        { rooms, service: options.mucDomain, title, description },
        ROOM_WALK_TIMEOUT_MS,
      )) as { rooms: number };
      return result.rooms;
    },

    /**
     * Replaces an account's bookmarks (XEP-0048 in private XML storage, XEP-0049): the rooms its chat
     * client shows and joins. Only for identities whose bookmarks the bundle keeps (business ones).
     */
    setBookmarks: async (user: string, rooms: readonly Bookmark[]): Promise<void> => {
      await call('private_set', { user, host: options.chatDomain, element: bookmarkStorage(rooms) });
    },

    /** Replaces many accounts' bookmarks, a thousand accounts per call (svc_set_bookmarks). */
    setManyBookmarks: async (accounts: readonly { user: string; rooms: readonly Bookmark[] }[]) => {
      for (let from = 0; from < accounts.length; from += BOOKMARKS_PER_CALL)
        await call(
          'svc_set_bookmarks',
          {
            host: options.chatDomain,
            bookmarks: accounts
              .slice(from, from + BOOKMARKS_PER_CALL)
              .map((account) => ({ user: account.user, storage: bookmarkStorage(account.rooms) })),
          },
          ROOM_WALK_TIMEOUT_MS,
        );
    },

    /**
     * Puts people in or out of an org's rooms (a circle's, a team's), all in one call: rooms side by
     * side, each room's places in order. A state, so a failed or undone call is put right by the next.
     */
    setRoomPlaces: async (places: readonly RoomPlace[]): Promise<void> => {
      if (places.length === 0) return;
      await call('svc_set_room_places', { service: options.mucDomain, places }, ROOM_WALK_TIMEOUT_MS);
    },

    /**
     * Gives existing rooms a new occupant limit, a thousand rooms a call; answers the rooms ejabberd
     * does not have (to be made with `ensureRoom`).
     */
    setRoomsMaxUsers: async (rooms: readonly string[], maxUsers: number): Promise<string[]> => {
      const missing: string[] = [];
      for (let from = 0; from < rooms.length; from += ROOMS_PER_RESIZE) {
        const answer = await call(
          'svc_set_rooms_max_users',
          {
            rooms: rooms.slice(from, from + ROOMS_PER_RESIZE),
            service: options.mucDomain,
            max_users: maxUsers,
          },
          ROOM_WALK_TIMEOUT_MS,
        );
        missing.push(...(answer as string[]));
      }
      return missing;
    },

    /** Resolves when ejabberd answers and takes the control plane's credential (readiness). */
    status: async (): Promise<void> => {
      await call('status', {});
    },

    /** Tells mod_svc_scope whether to archive the one-to-one and room messages of an app's prefix. */
    setArchiving: async (prefix: string, enabled: boolean): Promise<void> => {
      await call('svc_set_archiving', { prefix, enabled: enabled ? 1 : 0 });
    },
  };
}

export type EjabberdClient = ReturnType<typeof createEjabberdClient>;
