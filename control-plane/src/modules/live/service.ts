import type { Redis } from 'ioredis';
import {
  type ParticipantInfo,
  TrackSource,
  TrackType,
  type VideoGrant,
  type WebhookEvent,
} from 'livekit-server-sdk';
import type { DatabasePool } from 'slonik';
import type { LiveKitClient } from '../../adapters/livekit.js';
import type { Payer, Principal } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import { mapAtMost } from '../../platform/concurrency.js';
import { errors } from '../../platform/errors.js';
import { ORG_IDENTITY_MARKER } from '../../platform/identities.js';
import { withLease } from '../../platform/lease.js';
import type { Metering, Usage } from '../../platform/metering.js';
import { metricKey } from '../../platform/price-catalogue.js';
import type { Prices } from '../../platform/prices.js';
import { pruneInBatches } from '../../platform/pruning.js';
import type { Standing } from '../../platform/standing.js';
import { inTransaction, type Transaction } from '../../platform/transaction.js';
import type { RealtimeService } from '../realtime/service.js';
import {
  ATTRIBUTE_KIND,
  ATTRIBUTE_ORG,
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

/** LiveKit retries a failed webhook for about 30 s; the reconciler leaves sessions alone that long and more. */
export const RECONCILE_GRACE_MS = 60_000;
/**
 * How long a webhook's id is kept to recognise a retried delivery: LiveKit retries for about 30 s, so
 * a week is ample, and older ids are pruned (a table that only ever grew).
 */
export const EVENT_RETENTION_MS = 7 * 86_400_000;
/**
 * How long an ended session is kept: nothing reads it once billed, but its row is what refuses its
 * join again, so it stays well past any redelivery of its events (EVENT_RETENTION_MS).
 */
export const ENDED_SESSION_RETENTION_MS = 30 * 86_400_000;
/** How often the spend guard looks at live accounts with open sessions. */
export const SPEND_GUARD_EVERY_MS = 5_000;
/**
 * Participants removed from LiveKit at once: a room LiveKit no longer has takes seconds to answer, so
 * each removal starts as soon as another ends, but a 100,000-viewer room is not 100,000 requests at once.
 */
const EVICTIONS_AT_ONCE = 32;

/** Why a participant was removed: under this attribute of its own, and as a data message on this topic. */
export const NOTICE_TOPIC = 'svc.notice';
export const BALANCE_EXHAUSTED = {
  reason: 'balance_exhausted',
  message: 'The app’s prepaid balance is used up, so this session was ended. It can resume after a top-up.',
};
export const ORG_CALL_ENDED = {
  reason: 'org_access_ended',
  message: 'This member has no calls in the org any more (removed, disabled, suspended, or chat is off).',
};
type Notice = typeof BALANCE_EXHAUSTED;

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

const seconds = (from: Date, to: Date) => Math.max(0, Math.ceil((to.getTime() - from.getTime()) / 1000));

const payerOf = (session: OpenSessionRow): Payer => ({
  accountId: session.account_id,
  appId: session.app_id,
  mode: session.mode,
  ...(session.org_id ? { orgId: session.org_id } : {}),
});

export function createLiveService(deps: {
  pool: DatabasePool;
  redis: Redis;
  clock: Clock;
  livekit: LiveKitClient;
  realtime: RealtimeService;
  metering: Metering;
  prices: Prices;
  standing: Standing;
  publicUrl: string;
  onError?: (error: unknown) => void;
  /** Whether an identity may still be in its org's calls (asked at each join that names an org). */
  orgMayCall: (orgId: string, identity: string) => Promise<boolean>;
}) {
  /**
   * Ends sessions (locked by the caller, in participant order) and meters their minutes in one charge
   * per payer: sessions, then the account, then usage rows, the lock order of every transaction.
   * `endedAt` gives each session's end, or null when it never became active (not billed).
   */
  async function closeAndMeter(
    tx: Transaction,
    sessions: readonly OpenSessionRow[],
    endedAt: (session: OpenSessionRow) => Date | null,
  ) {
    const usages = new Map<string, { payer: Payer; usages: Usage[] }>();
    const closed: { participantSid: string; leftAt: Date; billedSeconds: number }[] = [];
    for (const session of sessions) {
      const ended = endedAt(session);
      // LiveKit stamps a leave to the whole second, which can fall before a join made later in that
      // second: a session that became active is billed at least its first second.
      const billed = ended ? Math.max(1, seconds(session.joined_at, ended)) : 0;
      const leftAt = new Date(Math.max(session.joined_at.getTime(), ended?.getTime() ?? 0));
      closed.push({ participantSid: session.participant_sid, leftAt, billedSeconds: billed });
      const payer = payerOf(session);
      const key = `${payer.accountId}:${payer.appId}:${payer.mode}:${payer.orgId ?? ''}`;
      const group = usages.get(key) ?? { payer, usages: [] };
      group.usages.push(usageOfSession(session, billed));
      usages.set(key, group);
    }
    if (closed.length > 0) await liveStore(tx).close(closed);
    await deps.metering.meterAll(tx, [...usages.values()]);
  }

  /** The app and account a LiveKit room belongs to, from the prefix of its name. */
  async function roomOwner(roomName: string): Promise<Payer | null> {
    const settings = await deps.realtime.findByChatPrefix(roomName.slice(0, roomName.indexOf('.')));
    return settings ? { appId: settings.app_id, accountId: settings.account_id, mode: settings.mode } : null;
  }

  /** Records a participant from LiveKit's report, if it joined with a token this service minted. */
  const joinedAtOf = (participant: ParticipantInfo) =>
    new Date(Number(participant.joinedAtMs) || Number(participant.joinedAt) * 1000);

  async function openSession(tx: Transaction, owner: Payer, roomName: string, participant: ParticipantInfo) {
    const kind = participant.attributes[ATTRIBUTE_KIND] as Kind | undefined;
    const quality = participant.attributes[ATTRIBUTE_QUALITY] as Quality | undefined;
    if (!kind || !KINDS.includes(kind) || !quality || !QUALITIES.includes(quality)) return;
    await liveStore(tx).openSession({
      participantSid: participant.sid,
      room: roomName,
      identity: participant.identity,
      ...owner,
      kind,
      publisher: participant.attributes[ATTRIBUTE_PUBLISHER] === 'true',
      orgId: participant.attributes[ATTRIBUTE_ORG] || null,
      declaredQuality: quality,
      joinedAt: joinedAtOf(participant),
    });
  }

  async function apply(tx: Transaction, event: WebhookEvent, owner: Payer | null): Promise<void> {
    const store = liveStore(tx);
    const roomName = event.room?.name ?? '';
    const at = new Date(Number(event.createdAt) * 1000);
    const participant = event.participant;
    switch (event.event) {
      case 'participant_joined': {
        if (!participant || !owner) return;
        await openSession(tx, owner, roomName, participant);
        // A session of the same identity still open from before was replaced: by a join from another
        // device (its leave may come later), or on a node that died without a leave. It ends as this
        // one begins, so the identity is never billed twice for the same seconds.
        const joinedAt = joinedAtOf(participant);
        const replaced = await store.lockOpen({
          room: roomName,
          identity: participant.identity,
          before: joinedAt,
        });
        await closeAndMeter(tx, replaced, () => joinedAt);
        return;
      }
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
            deps.clock.now(),
          );
        }
        return;
      case 'participant_left':
      case 'participant_connection_aborted': {
        if (!participant) return;
        // The leave carries the whole participant, so a lost join is made good here.
        if (owner) await openSession(tx, owner, roomName, participant);
        const aborted = event.event === 'participant_connection_aborted';
        await closeAndMeter(tx, await store.lockOpen({ participantSid: participant.sid }), () =>
          aborted ? null : at,
        );
        return;
      }
      case 'room_finished': {
        // Only this incarnation's sessions: those of one that died with its node are the reconciler's,
        // billed to their last sighting rather than to this room's end.
        const createdMs = Number(event.room?.creationTimeMs) || Number(event.room?.creationTime) * 1000 || 0;
        const since = new Date(createdMs - (createdMs % 1000));
        await closeAndMeter(tx, await store.lockOpen({ room: roomName, since }), () => at);
        return;
      }
      default:
        return;
    }
  }

  /**
   * Removes a participant of an account that cannot pay, telling it why; false when it had gone or
   * LiveKit did not answer (the spend guard tries again at its next turn).
   */
  const evict = async (room: string, identity: string, why: Notice = BALANCE_EXHAUSTED): Promise<boolean> => {
    try {
      return await deps.livekit.removeParticipant(room, identity, {
        topic: NOTICE_TOPIC,
        payload: why,
      });
    } catch (error) {
      deps.onError?.(error);
      return false;
    }
  };

  async function reconcileRooms(): Promise<{ rooms: number; closed: number }> {
    const rooms = await liveStore(deps.pool).openRooms();
    let closed = 0;
    for (const room of rooms) {
      // Read before LiveKit answers, which can take seconds: whoever it lists was there by then, and a
      // participant who left meanwhile is not billed for the wait.
      const now = deps.clock.now();
      // One room LiveKit cannot answer for (its node just died) must not hold up the others.
      const listed = await deps.livekit.listParticipants(room).catch((error: unknown) => {
        deps.onError?.(error);
        return undefined;
      });
      if (listed === undefined) continue;
      const present = new Set(listed.map((p) => p.sid));
      await inTransaction(
        deps.pool,
        async (tx) => {
          const store = liveStore(tx);
          const sessions = await store.lockOpen({ room });
          await store.markSeen(
            sessions.filter((s) => present.has(s.participant_sid)).map((s) => s.participant_sid),
            now,
          );
          const missing = sessions.filter((s) => !present.has(s.participant_sid));
          await store.markMissing(
            missing.filter((s) => s.missing_since === null).map((s) => s.participant_sid),
            now,
          );
          // Missing for the grace since a pass first found it so, not since it was last seen: a leave
          // LiveKit is still retrying (about 30 s) comes first and is billed to when it happened.
          const lost = missing.filter(
            (s) =>
              s.missing_since !== null &&
              now.getTime() - s.missing_since.getTime() >= RECONCILE_GRACE_MS &&
              now.getTime() - s.last_seen_at.getTime() >= RECONCILE_GRACE_MS,
          );
          await closeAndMeter(tx, lost, (session) => session.last_seen_at);
          closed += lost.length;
        },
        deps.onError,
      );
    }
    return { rooms: rooms.length, closed };
  }

  async function guardAccounts(): Promise<{ accounts: number; removed: number }> {
    const now = deps.clock.now();
    const store = liveStore(deps.pool);
    const sessions = await store.openLiveSessions();
    if (sessions.length === 0) return { accounts: 0, removed: 0 };
    // Grouped in one pass: a filter per account was accounts × sessions every few seconds.
    const byAccount = new Map<string, OpenSessionRow[]>();
    for (const session of sessions) {
      const open = byAccount.get(session.account_id);
      if (open) open.push(session);
      else byAccount.set(session.account_id, [session]);
    }
    const [table, positions] = await Promise.all([
      deps.prices.table(),
      deps.metering.positions([...byAccount.keys()], now),
    ]);
    // All exhausted accounts' participants in one run of removals: an account with a full room must
    // not hold up the removals of the others (the next pass waits until this one ends).
    const exhausted: OpenSessionRow[][] = [];
    for (const [accountId, open] of byAccount) {
      const secondsByMetric = new Map<string, number>();
      for (const session of open) {
        const usage = usageOfSession(session, seconds(session.joined_at, now));
        const key = metricKey(usage.product, usage.metric);
        secondsByMetric.set(key, (secondsByMetric.get(key) ?? 0) + usage.quantity);
      }
      let accrued = 0;
      for (const [key, quantity] of secondsByMetric) {
        const price = table.get(key)!;
        const left = Math.max(0, price.allowance - (positions.get(accountId)?.allowanceUsed.get(key) ?? 0));
        accrued += (Math.max(0, quantity - left) * price.priceMicros) / price.unitSize;
      }
      if ((positions.get(accountId)?.balance ?? 0) - accrued <= 0) exhausted.push(open);
    }
    const evicted = await mapAtMost(exhausted.flat(), EVICTIONS_AT_ONCE, (session) =>
      evict(session.room, session.identity),
    );
    return { accounts: exhausted.length, removed: evicted.filter(Boolean).length };
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
        /** The org (its id) the call is for: its minutes are the org's. */
        org?: string;
      },
    ) => {
      // Rooms whose name begins with "+" are orgs' calls (docs/orgs.md), never an app's own.
      if (input.org === undefined && input.room.startsWith(ORG_IDENTITY_MARKER))
        throw errors.invalidField('body', 'room', 'must not begin with "+": those rooms are orgs’ calls');
      const kind = input.kind ?? 'live';
      const settings = await deps.realtime.requireProduct(principal, kind === 'live' ? 'live' : 'calls');
      const publish = input.publish ?? PUBLISHES_BY_DEFAULT[kind];
      // LiveKit names are case-sensitive byte strings: the room goes in as sent, not as a JID node.
      const room = `${settings.chat_prefix}.${input.room}`;
      const token = await deps.livekit.mintToken({
        identity: input.identity,
        room,
        ttlSeconds: input.ttl_seconds,
        maxParticipants: settings.max_room_size,
        grant: grantFor(kind, publish),
        attributes: {
          [ATTRIBUTE_KIND]: kind,
          [ATTRIBUTE_QUALITY]: input.quality ?? 'hd',
          [ATTRIBUTE_PUBLISHER]: String(publish),
          ...(input.org ? { [ATTRIBUTE_ORG]: input.org } : {}),
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
        throw errors.unauthenticated('The webhook signature does not verify', {
          detail: error instanceof Error ? error.message : String(error),
        });
      }
      const owner = event.room?.name ? await roomOwner(event.room.name) : null;
      const applied = await inTransaction(
        deps.pool,
        async (tx) => {
          if (!(await liveStore(tx).claimEvent(event.id, event.event, deps.clock.now()))) return false;
          await apply(tx, event, owner);
          return true;
        },
        deps.onError,
      );
      // A participant of a live account that cannot pay (back with a token minted earlier) is sent away,
      // without holding up LiveKit's webhook queue for it.
      const participant = event.participant;
      if (
        applied &&
        event.event === 'participant_joined' &&
        participant &&
        owner?.mode === 'live' &&
        !(await deps.standing.funded(owner.accountId))
      ) {
        void evict(event.room!.name, participant.identity);
      }
      // A member of an org's call who has no calls there any more (a token minted earlier) likewise.
      const org = participant?.attributes[ATTRIBUTE_ORG];
      if (applied && event.event === 'participant_joined' && participant && org) {
        const may = await deps.orgMayCall(org, participant.identity).catch(() => false);
        if (!may) void evict(event.room!.name, participant.identity, ORG_CALL_ENDED);
      }
      return { applied };
    },

    /**
     * Ends the org's calls of one identity (or of all of them): each open session is sent away, told
     * why. Tokens handed out earlier are sent away at their next join (orgMayCall).
     */
    endOrgCalls: async (orgId: string, identity?: string) => {
      const sessions = await liveStore(deps.pool).openOfOrg(orgId, identity);
      await mapAtMost(sessions, EVICTIONS_AT_ONCE, (session) =>
        evict(session.room, session.identity, ORG_CALL_ENDED),
      );
    },

    /**
     * Makes good the leaves LiveKit could not report (the control plane was down longer than its
     * retries). Sessions LiveKit still lists are marked seen; the others, once past the grace period,
     * are closed and billed up to when they were last seen. One replica at a time.
     */
    reconcile: async (): Promise<{ rooms: number; closed: number }> => {
      const run = await withLease(deps.redis, 'live-reconcile', RECONCILE_GRACE_MS / 2, reconcileRooms);
      return run.ran ? run.result : { rooms: 0, closed: 0 };
    },

    /** Deletes webhook ids past their retention, in batches; answers how many went. */
    pruneEvents: () => {
      const before = new Date(deps.clock.now().getTime() - EVENT_RETENTION_MS);
      return pruneInBatches((limit) => liveStore(deps.pool).pruneEvents(before, limit));
    },

    /**
     * Sessions that ended over ENDED_SESSION_RETENTION_MS ago go, with their published quality; so do
     * qualities first reported that long ago whose session never came.
     */
    pruneEndedSessions: async () => {
      const before = new Date(deps.clock.now().getTime() - ENDED_SESSION_RETENTION_MS);
      const store = liveStore(deps.pool);
      const sessions = await pruneInBatches((limit) => store.pruneEndedSessions(before, limit));
      const orphans = await pruneInBatches((limit) => store.pruneOrphanedQualities(before, limit));
      return { pruned: sessions.pruned + orphans.pruned };
    },

    /**
     * The spend guard: a live account whose balance, less what its open sessions have accrued so far
     * (past its free minutes), is zero or below has every open participant removed, each told why,
     * so that a tiny balance cannot buy a long call. One replica at a time.
     */
    guardSpend: async (): Promise<{ accounts: number; removed: number }> => {
      const run = await withLease(deps.redis, 'live-spend-guard', SPEND_GUARD_EVERY_MS, guardAccounts);
      return run.ran ? run.result : { accounts: 0, removed: 0 };
    },
  };
}

export type LiveService = ReturnType<typeof createLiveService>;
