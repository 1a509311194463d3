import type { Redis } from 'ioredis';
import {
  type ParticipantInfo,
  TrackSource,
  TrackType,
  type VideoGrant,
  type WebhookEvent,
} from 'livekit-server-sdk';
import type { CommonQueryMethods, DatabasePool } from 'slonik';
import type { LiveKitClient } from '../../adapters/livekit.js';
import type { Clock } from '../../lib/clock.js';
import type { Principal } from '../accounts/schema.js';
import type { AccountsService } from '../accounts/service.js';
import type { BillingService, Usage } from '../billing/service.js';
import type { RealtimeService } from '../realtime/service.js';
import {
  ATTRIBUTE_KIND,
  ATTRIBUTE_PUBLISHER,
  ATTRIBUTE_QUALITY,
  higherQuality,
  KINDS,
  type Kind,
  type OpenSessionRow,
  PUBLISHES_BY_DEFAULT,
  QUALITIES,
  type Quality,
  qualityOfDimensions,
} from './schema.js';
import { liveStore } from './store.js';

/** A webhook whose signature does not verify: answered 401 and never metered. */
export class WebhookSignatureError extends Error {
  override name = 'WebhookSignatureError';
}

/** LiveKit retries a failed webhook for about 30 s; the reconciler leaves sessions alone that long and more. */
export const RECONCILE_GRACE_MS = 60_000;
const RECONCILE_LOCK = 'svc:live:reconcile';

const PUBLISHER: Omit<VideoGrant, 'room' | 'roomJoin'> = {
  canSubscribe: true,
  canPublish: true,
  canPublishData: true,
  canPublishSources: [
    TrackSource.CAMERA,
    TrackSource.MICROPHONE,
    TrackSource.SCREEN_SHARE,
    TrackSource.SCREEN_SHARE_AUDIO,
  ],
};
const VIEWER: Omit<VideoGrant, 'room' | 'roomJoin'> = {
  canSubscribe: true,
  canPublish: false,
  canPublishData: false,
};

/** What a token allows: viewers only watch; audio rooms take microphones only. */
export function grantFor(kind: Kind, publish: boolean): Omit<VideoGrant, 'room' | 'roomJoin'> {
  if (!publish) return VIEWER;
  return kind === 'audio' ? { ...PUBLISHER, canPublishSources: [TrackSource.MICROPHONE] } : PUBLISHER;
}

/** A participant's minutes as usage: audio rooms at the audio price, video at the higher quality. */
export function usageOfSession(session: OpenSessionRow, seconds: number): Usage {
  return {
    product: session.kind === 'live' ? 'live' : 'calls',
    metric:
      session.kind === 'audio'
        ? 'audio_minutes'
        : `${higherQuality(session.declared_quality, session.published_quality)}_minutes`,
    quantity: seconds,
  };
}

interface RoomOwner {
  appId: string;
  accountId: string;
  mode: OpenSessionRow['mode'];
}

const seconds = (from: Date, to: Date) => Math.max(0, Math.ceil((to.getTime() - from.getTime()) / 1000));

export function createLiveService(deps: {
  pool: DatabasePool;
  redis: Redis;
  clock: Clock;
  livekit: LiveKitClient;
  accounts: AccountsService;
  realtime: RealtimeService;
  billing: BillingService;
  publicUrl: string;
}) {
  /** Ends a session at `leftAt` and meters it (unless it never became active). */
  async function closeAndMeter(
    tx: CommonQueryMethods,
    session: OpenSessionRow,
    leftAt: Date,
    meter: boolean,
  ) {
    const billed = meter ? seconds(session.joined_at, leftAt) : 0;
    await liveStore(tx).close(session.participant_sid, leftAt, billed);
    if (billed > 0) {
      await deps.billing.meterAfter(
        { accountId: session.account_id, appId: session.app_id, mode: session.mode },
        [usageOfSession(session, billed)],
        tx,
      );
    }
  }

  /** The app and account a LiveKit room belongs to, from the prefix of its name. */
  async function roomOwner(roomName: string): Promise<RoomOwner | null> {
    const settings = await deps.realtime.findByChatPrefix(roomName.slice(0, roomName.indexOf('.')));
    const app = settings && (await deps.accounts.getApp(settings.app_id));
    return settings && app ? { appId: app.id, accountId: app.account_id, mode: settings.mode } : null;
  }

  /** Records a participant from LiveKit's report, if it joined with a token this service minted. */
  async function openSession(
    tx: CommonQueryMethods,
    owner: RoomOwner,
    roomName: string,
    participant: ParticipantInfo,
  ) {
    const kind = participant.attributes[ATTRIBUTE_KIND] as Kind | undefined;
    const quality = participant.attributes[ATTRIBUTE_QUALITY] as Quality | undefined;
    if (!kind || !KINDS.includes(kind) || !quality || !QUALITIES.includes(quality)) return;
    const joinedMs = Number(participant.joinedAtMs) || Number(participant.joinedAt) * 1000;
    await liveStore(tx).openSession({
      participantSid: participant.sid,
      room: roomName,
      identity: participant.identity,
      ...owner,
      kind,
      publisher: participant.attributes[ATTRIBUTE_PUBLISHER] === 'true',
      declaredQuality: quality,
      joinedAt: new Date(joinedMs),
    });
  }

  async function apply(tx: CommonQueryMethods, event: WebhookEvent, owner: RoomOwner | null): Promise<void> {
    const store = liveStore(tx);
    const roomName = event.room?.name ?? '';
    const at = new Date(Number(event.createdAt) * 1000);
    const participant = event.participant;
    switch (event.event) {
      case 'participant_joined':
        if (participant && owner) await openSession(tx, owner, roomName, participant);
        return;
      case 'track_published':
        if (
          participant &&
          event.track?.type === TrackType.VIDEO &&
          event.track.width > 0 &&
          event.track.height > 0
        ) {
          await store.recordPublishedQuality(
            participant.sid,
            qualityOfDimensions(event.track.width, event.track.height),
          );
        }
        return;
      case 'participant_left':
      case 'participant_connection_aborted':
        if (!participant) return;
        // The leave carries the whole participant, so a lost join is made good here.
        if (owner) await openSession(tx, owner, roomName, participant);
        for (const session of await store.lockOpen({ participantSid: participant.sid })) {
          await closeAndMeter(tx, session, at, event.event === 'participant_left');
        }
        return;
      case 'room_finished':
        for (const session of await store.lockOpen({ room: roomName }))
          await closeAndMeter(tx, session, at, true);
        return;
      default:
        return;
    }
  }

  return {
    mintToken: async (
      principal: Principal,
      input: {
        room: string;
        identity: string;
        kind?: Kind;
        publish?: boolean;
        ttl_seconds: number;
        quality?: Quality;
      },
    ) => {
      const kind = input.kind ?? 'live';
      const settings = await deps.realtime.requireProduct(principal, kind === 'live' ? 'live' : 'calls');
      await deps.billing.requireLiveBalance(principal, 'live and call tokens');
      const publish = input.publish ?? PUBLISHES_BY_DEFAULT[kind];
      const room = `${settings.chat_prefix}.${input.room}`;
      await deps.livekit.ensureRoom(room, settings.max_room_size);
      const token = await deps.livekit.mintToken({
        identity: input.identity,
        room,
        ttlSeconds: input.ttl_seconds,
        grant: grantFor(kind, publish),
        attributes: {
          [ATTRIBUTE_KIND]: kind,
          [ATTRIBUTE_QUALITY]: input.quality ?? 'hd',
          [ATTRIBUTE_PUBLISHER]: String(publish),
        },
      });
      return { url: deps.publicUrl, token, room, expires_in: input.ttl_seconds };
    },

    /** Verifies and applies one webhook, once per event id whatever LiveKit retries. */
    handleWebhook: async (body: string, authorization: string | undefined): Promise<{ applied: boolean }> => {
      let event: WebhookEvent;
      try {
        event = await deps.livekit.receiveWebhook(body, authorization);
      } catch (error) {
        throw new WebhookSignatureError(error instanceof Error ? error.message : String(error));
      }
      // Looked up before the transaction: slonik runs nothing on the pool while one is open.
      const owner = event.room?.name ? await roomOwner(event.room.name) : null;
      return deps.pool.transaction(async (tx) => {
        if (!(await liveStore(tx).claimEvent(event.id, event.event, deps.clock.now())))
          return { applied: false };
        await apply(tx, event, owner);
        return { applied: true };
      });
    },

    /**
     * Makes good the leaves LiveKit could not report (the control plane was down longer than its
     * retries). Sessions LiveKit still lists are marked seen; the others, once past the grace period,
     * are closed and billed up to when they were last seen. One replica at a time.
     */
    reconcile: async (): Promise<{ rooms: number; closed: number }> => {
      if ((await deps.redis.set(RECONCILE_LOCK, '1', 'PX', RECONCILE_GRACE_MS / 2, 'NX')) !== 'OK') {
        return { rooms: 0, closed: 0 };
      }
      const rooms = await liveStore(deps.pool).openRooms();
      let closed = 0;
      for (const room of rooms) {
        const present = new Set((await deps.livekit.listParticipants(room)).map((p) => p.sid));
        const now = deps.clock.now();
        await deps.pool.transaction(async (tx) => {
          const store = liveStore(tx);
          const sessions = await store.lockOpen({ room });
          await store.markSeen(
            sessions.filter((s) => present.has(s.participant_sid)).map((s) => s.participant_sid),
            now,
          );
          for (const session of sessions) {
            if (present.has(session.participant_sid)) continue;
            if (now.getTime() - session.last_seen_at.getTime() < RECONCILE_GRACE_MS) continue;
            await closeAndMeter(tx, session, session.last_seen_at, true);
            closed += 1;
          }
        });
      }
      return { rooms: rooms.length, closed };
    },
  };
}

export type LiveService = ReturnType<typeof createLiveService>;
