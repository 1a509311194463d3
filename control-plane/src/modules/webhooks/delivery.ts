import type { DatabasePool } from 'slonik';
import type { WebhookOutcome, WebhookSender } from '../../adapters/webhook-sender.js';
import type { Clock } from '../../platform/clock.js';
import { newId } from '../../platform/ids.js';
import type { Outbox } from '../../platform/outbox.js';
import type { Logger } from '../../platform/route.js';
import type { Sealer } from '../../platform/sealing.js';
import { inTransaction } from '../../platform/transaction.js';
import {
  DELIVERY_TIMEOUT_MS,
  DISABLE_AFTER_FAILING_MS,
  RETRY_DELAYS_SECONDS,
  RETRY_JITTER,
} from './schema.js';
import { presentEndpoint } from './service.js';
import { type SigningKeys, signatureHeaders, signingKeys } from './signatures.js';
import {
  type Claim,
  type ClaimedRow,
  type EndpointState,
  type SuccessRecord,
  webhooksStore,
} from './store.js';

export interface DeliveryOptions {
  /** Attempts one worker runs at once. */
  maxInFlight: number;
  /** Attempts one worker runs at once to one endpoint: a slow endpoint holds only these. */
  perEndpoint: number;
  /**
   * Deliveries of one fast endpoint a worker claims ahead of its attempts, so that one claim feeds
   * many of them. A slower endpoint holds what its attempts can start, at the pace they ran so far and
   * with the slots it gets, within half the time a claim leaves for starting them (an endpoint not yet
   * seen is taken to need the whole 5 s an attempt): one claim need not cover a slow endpoint's next
   * hour, nor starve a fast one while the next claim runs. A worker claims more of an endpoint once it
   * holds half its share or less, unless its last claim found no more due. A held delivery whose
   * claim would lapse before its attempt could end is given back unsent, so that it is never sent twice.
   */
  heldPerEndpoint: number;
  /** Deliveries one worker holds at most, claimed and running. */
  maxHeld: number;
  /**
   * How long a claimed delivery stays with its worker. Far above an attempt's 5 s and its wait, so
   * only a worker that stopped (killed) lets another send that attempt again.
   */
  claimMs: number;
  /** How often a worker looks for due deliveries that no local emit announced (other replicas', retries). */
  pollMs: number;
  /** Successful attempts are recorded together, at most this long after they ended. */
  recordEveryMs: number;
}

export const DEFAULT_DELIVERY_OPTIONS: DeliveryOptions = {
  maxInFlight: 64,
  perEndpoint: 8,
  heldPerEndpoint: 512,
  maxHeld: 1024,
  claimMs: 30_000,
  pollMs: 500,
  recordEveryMs: 25,
};

/** A claimed delivery and when its claim lapses: itself the claim the store's writes about it name. */
type HeldRow = ClaimedRow & Claim;

/** An attempt starts only while its claim has room for it: 5 s, and time to record it. */
const LAST_START_BEFORE_LAPSE_MS = DELIVERY_TIMEOUT_MS + 5_000;

/** Endpoints whose pace a worker remembers (the busiest, lately); the others start as if unseen. */
const PACES_KEPT = 512;
/** How much the last attempt moves an endpoint's pace. */
const PACE_WEIGHT = 0.2;

/** Successful attempts recorded in one statement at most. */
export const RECORDED_AT_ONCE = 256;

/** The delay before the retry that follows the `failures`-th failed attempt, with its jitter. */
export function retryDelayMs(failures: number, random: () => number = Math.random): number | null {
  const base = RETRY_DELAYS_SECONDS[failures - 1];
  if (base === undefined) return null;
  return Math.round(base * 1000 * (1 - RETRY_JITTER + 2 * RETRY_JITTER * random()));
}

/** An attempt's outcome: the sender's, or a refusal before sending. */
type AttemptOutcome =
  | WebhookOutcome
  | { kind: 'failure'; reason: 'secret-unavailable'; message: string; latencyMs: number };

const succeeded = (outcome: AttemptOutcome) =>
  outcome.kind === 'response' && outcome.status >= 200 && outcome.status < 300;

/**
 * The delivery worker of one control plane. It claims due deliveries (skipping rows other replicas
 * are claiming, so an attempt is sent once), signs and sends each, and records the attempt: a 2xx
 * ends the delivery; anything else, a timeout included, schedules the next retry until the schedule
 * runs out and the delivery fails. An endpoint failing for five days is disabled and its app told
 * (`webhook_endpoint.disabled` to its other endpoints, and the log). At-least-once: a worker killed
 * mid-attempt leaves its claim to lapse, and the attempt is sent again.
 */
export function createWebhookDelivery(deps: {
  pool: DatabasePool;
  clock: Clock;
  sealer: Sealer;
  sender: WebhookSender;
  outbox: Outbox;
  /** The endpoint as it is now (the webhooks service's cache, which every change invalidates). */
  endpoints: { endpointState(endpointId: string): Promise<EndpointState | null> };
  log: Logger;
  /** Test-mode endpoints may use http:// (SVC_WEBHOOK_ALLOW_HTTP). */
  allowHttp: boolean;
  options?: Partial<DeliveryOptions>;
}) {
  const options = { ...DEFAULT_DELIVERY_OPTIONS, ...deps.options };
  /** Each remembered endpoint's attempt time (ms, a moving average), most lately used last. */
  const paces = new Map<string, number>();
  /** Signing secrets opened, as their keys, by their sealed bytes as the endpoints' cache holds them. */
  const opened = new WeakMap<Buffer, SigningKeys>();

  /** Endpoints whose last claim found fewer due deliveries than it had room for: none to claim ahead. */
  const drained = new Set<string>();

  function notePace(endpointId: string, latencyMs: number) {
    const pace = paces.get(endpointId);
    paces.delete(endpointId);
    paces.set(endpointId, pace === undefined ? latencyMs : pace + PACE_WEIGHT * (latencyMs - pace));
    if (paces.size > PACES_KEPT) {
      const forgotten = paces.keys().next().value!;
      paces.delete(forgotten);
      drained.delete(forgotten);
    }
  }

  /** Attempts each endpoint held here can run at once: its own limit, or its part of the worker's. */
  function slotsEach(): number {
    let active = running.size;
    for (const endpointId of waiting.keys()) if (!running.has(endpointId)) active += 1;
    return Math.max(1, Math.min(options.perEndpoint, Math.floor(options.maxInFlight / Math.max(1, active))));
  }

  /** How many deliveries of an endpoint this worker holds at most: what it can start in time. */
  function share(endpointId: string, slots = slotsEach()): number {
    const pace = Math.max(1, paces.get(endpointId) ?? DELIVERY_TIMEOUT_MS);
    const startable = (slots * (options.claimMs - LAST_START_BEFORE_LAPSE_MS)) / 2 / pace;
    return Math.max(slots, Math.min(options.heldPerEndpoint, Math.floor(startable)));
  }
  /** Claimed deliveries waiting for a slot, by endpoint, and the attempts running, by endpoint. */
  const waiting = new Map<string, HeldRow[]>();
  const running = new Map<string, number>();
  const attempts = new Set<Promise<void>>();
  let pumping: Promise<number> | null = null;
  let again = false;
  let stopped = false;

  /** Successful attempts waiting to be recorded, all in one statement. */
  let successes: SuccessRecord[] = [];
  let recording: Promise<void> | null = null;
  let recordTimer: NodeJS.Timeout | null = null;

  function recordSuccesses(): Promise<void> {
    if (recordTimer) clearTimeout(recordTimer);
    recordTimer = null;
    const batch = successes;
    successes = [];
    const previous = recording ?? Promise.resolve();
    const current = previous.then(async () => {
      if (batch.length === 0) return;
      await webhooksStore(deps.pool)
        .recordSuccesses(batch)
        .catch((error: unknown) =>
          deps.log.error(
            { err: error, attempts: batch.length },
            'webhook attempts not recorded; their claims will lapse',
          ),
        );
    });
    recording = current;
    void current.finally(() => {
      if (recording === current) recording = null;
    });
    return current;
  }

  function keepSuccess(record: SuccessRecord) {
    successes.push(record);
    if (successes.length >= RECORDED_AT_ONCE) void recordSuccesses();
    else recordTimer ??= setTimeout(() => void recordSuccesses(), options.recordEveryMs);
  }

  async function disableIfFailing(row: ClaimedRow, failingSince: Date) {
    const now = deps.clock.now();
    if (now.getTime() - failingSince.getTime() < DISABLE_AFTER_FAILING_MS) return;
    const disabled = await inTransaction(deps.pool, async (tx) => {
      const endpoint = await webhooksStore(tx).disableFailing(
        row.endpoint_id,
        new Date(now.getTime() - DISABLE_AFTER_FAILING_MS),
        now,
      );
      if (endpoint) {
        await deps.outbox.emit(tx, {
          appId: row.app_id,
          mode: row.mode,
          type: 'webhook_endpoint.disabled',
          data: { reason: 'failing', endpoint: presentEndpoint(endpoint) },
        });
      }
      return endpoint;
    });
    if (disabled) {
      deps.log.warn(
        { endpointId: row.endpoint_id, appId: row.app_id, failingSince },
        'disabled a webhook endpoint that failed every attempt for five days',
      );
    }
  }

  const refused = (reason: 'invalid-url' | 'secret-unavailable', message: string): AttemptOutcome => ({
    kind: 'failure',
    reason,
    message,
    latencyMs: 0,
  });

  /** Signs and sends one attempt; what cannot be sent is a failed attempt like any other. */
  async function send(row: HeldRow, endpoint: EndpointState, at: Date): Promise<AttemptOutcome> {
    // An operator may have turned plain http off since the endpoint was registered.
    if (endpoint.url.startsWith('http:') && !(row.mode === 'test' && deps.allowHttp))
      return refused('invalid-url', 'plain http:// is not allowed for this endpoint any more');
    let keys = opened.get(endpoint.secret_sealed);
    try {
      if (keys === undefined) {
        keys = signingKeys(deps.sealer.open(endpoint.secret_sealed, row.endpoint_id));
        opened.set(endpoint.secret_sealed, keys);
      }
    } catch {
      deps.log.error(
        { endpointId: row.endpoint_id },
        "a webhook endpoint's signing secret does not open (SVC_SEALING_KEY changed?): rotate it",
      );
      return refused('secret-unavailable', 'the signing secret cannot be opened: rotate it');
    }
    const headers = signatureHeaders(keys, row.event_id, row.body, at);
    return deps.sender.send({ url: endpoint.url, headers, body: row.body });
  }

  async function attempt(row: HeldRow) {
    const endpoint = await deps.endpoints.endpointState(row.endpoint_id);
    // Deleted since the claim: its claim lapses and the purge takes the row.
    if (!endpoint) return;
    // Disabled, its deliveries wait. Or the lookup waited (a busy pool) until the claim has no room
    // left for an attempt: sent now, it could still be under way when another replica claims it.
    if (
      (!endpoint.enabled && row.event_type !== 'ping') ||
      row.claimedUntil.getTime() - deps.clock.now().getTime() < LAST_START_BEFORE_LAPSE_MS
    ) {
      await webhooksStore(deps.pool).releaseClaims([row], deps.clock.now());
      return;
    }
    const at = deps.clock.now();
    const outcome = await send(row, endpoint, at);
    // Answers and timeouts tell how fast the endpoint goes; a refusal or a failed connection does not.
    if (outcome.kind === 'response' || outcome.reason === 'timeout')
      notePace(row.endpoint_id, outcome.latencyMs);
    // PostgreSQL text holds no NUL character; a receiver's answer may.
    const excerpt = (outcome.kind === 'response' ? outcome.excerpt : outcome.message).replaceAll(
      '\u0000',
      '\uFFFD',
    );
    if (succeeded(outcome) && outcome.kind === 'response') {
      keepSuccess({
        claim: row,
        endpointId: row.endpoint_id,
        at,
        statusCode: outcome.status,
        latencyMs: Math.round(outcome.latencyMs),
        excerpt,
      });
      return;
    }
    const failures = row.failures + 1;
    const delay = retryDelayMs(failures);
    const failingSince = await webhooksStore(deps.pool).recordFailure({
      claim: row,
      endpointId: row.endpoint_id,
      at,
      statusCode: outcome.kind === 'response' ? outcome.status : null,
      failure: outcome.kind === 'failure' ? outcome.reason : null,
      latencyMs: Math.round(outcome.latencyMs),
      excerpt,
      nextAttemptAt: delay === null ? null : new Date(deps.clock.now().getTime() + delay),
    });
    deps.log.info(
      {
        deliveryId: row.id,
        endpointId: row.endpoint_id,
        status: outcome.kind === 'response' ? outcome.status : outcome.reason,
        failures,
      },
      delay === null ? 'webhook delivery failed for good' : 'webhook attempt failed; retrying later',
    );
    if (failingSince) await disableIfFailing(row, failingSince);
  }

  /**
   * Starts the waiting deliveries that have a slot: per endpoint, and in all. Endpoints take turns:
   * one served goes to the back, so that busy endpoints cannot keep the slots from the others.
   */
  function dispatch() {
    const served: string[] = [];
    const late: HeldRow[] = [];
    for (const [endpointId, queue] of [...waiting]) {
      while (queue.length > 0 && attempts.size < options.maxInFlight) {
        const busy = running.get(endpointId) ?? 0;
        if (busy >= options.perEndpoint) break;
        const row = queue.shift()!;
        if (row.claimedUntil.getTime() - deps.clock.now().getTime() < LAST_START_BEFORE_LAPSE_MS) {
          late.push(row);
          continue;
        }
        running.set(endpointId, busy + 1);
        served.push(endpointId);
        const done = attempt(row)
          .catch((error: unknown) =>
            deps.log.error(
              { err: error, deliveryId: row.id },
              'a webhook attempt went wrong; its claim will lapse',
            ),
          )
          .finally(() => {
            attempts.delete(done);
            const left = (running.get(endpointId) ?? 1) - 1;
            if (left === 0) running.delete(endpointId);
            else running.set(endpointId, left);
            dispatch();
            // Claim more of this endpoint before its held deliveries run out (a claim under way takes
            // it in, or runs again once done), unless its last claim found no more due. Holding
            // nothing, it is judged again by the next claim that finds it.
            const holding = left + (waiting.get(endpointId)?.length ?? 0);
            if (!drained.has(endpointId) && holding <= share(endpointId) / 2) pumpQuietly();
            if (holding === 0) drained.delete(endpointId);
          });
        attempts.add(done);
      }
      if (queue.length === 0) waiting.delete(endpointId);
    }
    // Given back due at once rather than when their claims lapse, and claimed again in turn. Counted
    // with the attempts, so that whoever waits for them (deliverDue) waits for this too.
    if (late.length > 0) {
      const givenBack: Promise<void> = webhooksStore(deps.pool)
        .releaseClaims(late, deps.clock.now())
        .then(
          () => pumpQuietly(),
          (error: unknown) =>
            deps.log.warn({ err: error, deliveries: late.length }, 'could not give back late webhook claims'),
        )
        .finally(() => attempts.delete(givenBack));
      attempts.add(givenBack);
    }
    for (const endpointId of new Set(served)) {
      const queue = waiting.get(endpointId);
      if (!queue) continue;
      waiting.delete(endpointId);
      waiting.set(endpointId, queue);
    }
  }

  /** Marks the endpoints a claim gave less than their room as drained, the others as not. */
  function noteDrained(
    rooms: ReadonlyMap<string, number>,
    unseenRoom: number,
    got: ReadonlyMap<string, number>,
  ) {
    for (const [endpointId, room] of rooms) {
      if ((got.get(endpointId) ?? 0) < room) drained.add(endpointId);
      else drained.delete(endpointId);
    }
    for (const [endpointId, count] of got) {
      if (rooms.has(endpointId)) continue;
      if (count < unseenRoom) drained.add(endpointId);
      else drained.delete(endpointId);
    }
  }

  /** What this worker holds of each endpoint: waiting and running. */
  function heldByEndpoint(): Map<string, number> {
    const counts = new Map(running);
    for (const [endpointId, queue] of waiting)
      counts.set(endpointId, (counts.get(endpointId) ?? 0) + queue.length);
    return counts;
  }

  /** A claim that fails (the database away) is logged and tried again at the next poll. */
  function pumpQuietly() {
    void pump().catch((error: unknown) =>
      deps.log.warn({ err: error }, 'could not claim webhook deliveries; trying again'),
    );
  }

  /** Claims due deliveries while there is room, and starts what it can; answers how many it claimed. */
  function pump(): Promise<number> {
    if (stopped) return Promise.resolve(0);
    if (pumping) {
      again = true;
      return pumping;
    }
    pumping = (async () => {
      let claimedAll = 0;
      try {
        do {
          again = false;
          // A claim takes at most one fast endpoint's share: looking through more rows costs every claim.
          const holding = heldByEndpoint();
          const held = [...holding.values()].reduce((sum, count) => sum + count, 0);
          const room = Math.min(options.maxHeld - held, options.heldPerEndpoint);
          if (room <= 0) break;
          // What each endpoint held or remembered may take; an endpoint not yet seen, its first share.
          // Endpoints holding over half their share have nothing worth claiming yet.
          const slots = slotsEach();
          const rooms = new Map<string, number>();
          const skip: string[] = [];
          for (const endpointId of new Set([...paces.keys(), ...holding.keys()])) {
            const endpointShare = share(endpointId, slots);
            const endpointHeld = holding.get(endpointId) ?? 0;
            if (endpointHeld > endpointShare / 2) skip.push(endpointId);
            else rooms.set(endpointId, endpointShare - endpointHeld);
          }
          const unseenRoom = share('', slots);
          const now = deps.clock.now();
          const claimedUntil = new Date(now.getTime() + options.claimMs);
          const claimed = await inTransaction(deps.pool, (tx) =>
            webhooksStore(tx).claimDue({
              now,
              claimUntil: claimedUntil,
              limit: room,
              rooms,
              unseenRoom,
              skip,
              // Endpoints past those the claim looks through are reached from another random start.
              start: newId('whe'),
            }),
          );
          const got = new Map<string, number>();
          for (const row of claimed) {
            const queue = waiting.get(row.endpoint_id) ?? [];
            queue.push({ ...row, claimedUntil });
            waiting.set(row.endpoint_id, queue);
            got.set(row.endpoint_id, (got.get(row.endpoint_id) ?? 0) + 1);
          }
          claimedAll += claimed.length;
          dispatch();
          if (claimed.length === room) again = true;
          // Given less than its room by a claim that was not cut short, an endpoint has no more due.
          else noteDrained(rooms, unseenRoom, got);
        } while (again && !stopped);
      } finally {
        pumping = null;
      }
      return claimedAll;
    })();
    return pumping;
  }

  return {
    /** Runs the worker: on every announcement of due deliveries, and every `pollMs`. */
    start: () => {
      deps.outbox.onDue(pumpQuietly);
      const timer = setInterval(pumpQuietly, options.pollMs);
      timer.unref();
      return async () => {
        stopped = true;
        clearInterval(timer);
        await pumping?.catch(() => {});
        // What was claimed but not started goes back at once rather than when its claim lapses.
        const unstarted = [...waiting.values()].flat();
        waiting.clear();
        await Promise.allSettled([...attempts]);
        await recordSuccesses();
        if (unstarted.length > 0) await webhooksStore(deps.pool).releaseClaims(unstarted, deps.clock.now());
      };
    },

    /**
     * Sends every due delivery and waits until their attempts are recorded (tests, the admin CLI): of
     * every endpoint while fewer than a claim looks at have some due (store's ENDPOINTS_EXPLORED).
     */
    deliverDue: async (): Promise<void> => {
      for (;;) {
        const claimed = await pump();
        if (attempts.size === 0 && waiting.size === 0 && claimed === 0) break;
        while (attempts.size > 0) await Promise.allSettled([...attempts]);
      }
      await recordSuccesses();
    },
  };
}

export type WebhookDelivery = ReturnType<typeof createWebhookDelivery>;
