/**
 * Live streams and calls in an app: a live token from your app's server turned into a joined
 * `livekit-client` room that rejoins with a fresh token when LiveKit gives up on its own reconnection.
 * Import from `@svc-bundle/sdk/live`; needs the `livekit-client` package (a peer dependency) and WebRTC
 * (browsers; React Native with `@livekit/react-native`'s globals).
 * @module
 */
import {
  ConnectionError,
  ConnectionErrorReason,
  DisconnectReason,
  Room,
  type RoomConnectOptions,
  RoomEvent,
  type RoomOptions,
} from 'livekit-client';
import type { Output } from './call.js';
import { CallbackRefusal, endSignal, holdCredential } from './held.js';

/** What `live.tokens.create` answers. */
export type LiveToken = Output<'live.tokens.create'>;

export interface LiveOptions {
  /**
   * Asks your app's server for a token (it calls `live.tokens.create` with its secret key). Called to
   * join, and again when the session must rejoin with a token that has expired (or expires within
   * `renewBeforeSeconds`) or that LiveKit refused. (LiveKit resumes a dropped connection by itself;
   * the session rejoins when LiveKit gave up, as after a long network loss or a server restart.)
   * A rejection ends the session: it is how your server says no.
   */
  token: () => Promise<LiveToken>;
  /** Options of the `Room` (adaptive stream, reconnect policy, …). */
  room?: RoomOptions;
  /** Options of each `room.connect`. */
  connect?: RoomConnectOptions;
  /** Rejoins tried before the session ends; default 5 (1, 2, 4, 8, 16 s apart). */
  rejoinAttempts?: number;
  /** Renew a token that expires within this many seconds before rejoining with it; default 30. */
  renewBeforeSeconds?: number;
}

/** How a live session ended: LiveKit's reason, or the error of the rejoin that failed. */
export interface LiveEnd {
  reason?: DisconnectReason;
  error?: unknown;
}

export interface LiveSession {
  /** The joined room. After a rejoin it emits `RoomEvent.Connected` again: publish your tracks there. */
  readonly room: Room;
  /** The token of the current connection. */
  readonly token: LiveToken;
  /**
   * Settles when the session ends for good: with the reason LiveKit gave (`CLIENT_INITIATED` after
   * `leave()`; removed, room deleted, same identity joined elsewhere), or with the error that made the
   * last rejoin fail.
   */
  readonly ended: Promise<LiveEnd>;
  /** Leaves the room and stops rejoining. */
  leave(): Promise<void>;
}

/** Disconnections that a rejoin must not undo: someone decided them. */
const FINAL = new Set<DisconnectReason | undefined>([
  DisconnectReason.CLIENT_INITIATED,
  DisconnectReason.DUPLICATE_IDENTITY,
  DisconnectReason.PARTICIPANT_REMOVED,
  DisconnectReason.ROOM_DELETED,
  DisconnectReason.ROOM_CLOSED,
  DisconnectReason.USER_REJECTED,
  DisconnectReason.USER_UNAVAILABLE,
]);
const DEFAULT_REJOIN_ATTEMPTS = 5;
const FIRST_REJOIN_DELAY_MS = 1_000;

const notAllowed = (error: unknown) =>
  error instanceof ConnectionError && error.reason === ConnectionErrorReason.NotAllowed;

/** Joins the room of a token from `options.token`, and keeps the session joined. */
export async function joinLive(options: LiveOptions): Promise<LiveSession> {
  const held = await holdCredential(
    options.token,
    (token, fetchedAt) => fetchedAt + token.expires_in * 1_000,
    options.renewBeforeSeconds,
  );
  const room = new Room(options.room);
  const connect = () => room.connect(held.current.url, held.current.token, options.connect);
  await connect();
  held.fresh = false;
  let leaving = false;
  const { ended, end } = endSignal<LiveEnd>();

  const rejoin = async () => {
    const attempts = options.rejoinAttempts ?? DEFAULT_REJOIN_ATTEMPTS;
    let lastError: unknown;
    for (let attempt = 0; attempt < attempts && !leaving; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, FIRST_REJOIN_DELAY_MS * 2 ** attempt));
      if (leaving) break;
      try {
        if (held.expiring()) await held.renew();
        await connect().catch(async (error) => {
          // A token kept from the join may be refused by now: ask once for a fresh one.
          if (held.fresh || !notAllowed(error)) throw error;
          await held.renew();
          await connect();
        });
        return;
      } catch (error) {
        lastError = error;
        // The app's server said no, or LiveKit refused a token minted a moment ago.
        if (error instanceof CallbackRefusal) return end({ error: error.cause });
        if (held.fresh && notAllowed(error)) return end({ error });
      } finally {
        held.fresh = false;
      }
    }
    if (!leaving) end({ error: lastError });
  };

  // After leave() the session is already ended (by leave itself): nothing to rejoin.
  room.on(RoomEvent.Disconnected, (reason) => {
    if (leaving) return;
    if (FINAL.has(reason)) end({ reason });
    else void rejoin();
  });

  return {
    room,
    get token() {
      return held.current;
    },
    ended,
    leave: async () => {
      leaving = true;
      await room.disconnect();
      end({ reason: DisconnectReason.CLIENT_INITIATED });
    },
  };
}
