import type { DatabasePool } from 'slonik';
import type { WebhookOutcome, WebhookSender } from '../../adapters/webhook-sender.js';
import type { Clock } from '../../platform/clock.js';
import type { Outbox } from '../../platform/outbox.js';
import type { Logger } from '../../platform/route.js';
import type { Sealer } from '../../platform/sealing.js';
import { inTransaction } from '../../platform/transaction.js';
import { DISABLE_AFTER_FAILING_MS, RETRY_DELAYS_SECONDS, RETRY_JITTER } from './schema.js';
import { presentEndpoint } from './service.js';
import { signatureHeaders } from './signatures.js';
import { type ClaimedRow, webhooksStore } from './store.js';

export interface DeliveryOptions {
  /** Attempts one worker runs at once. */
  maxInFlight: number;
  /** Attempts one worker runs at once to one endpoint: a slow endpoint holds only these. */
  perEndpoint: number;
  /**
   * How long a claimed delivery stays with its worker. Far above an attempt's 5 s, so only a worker
   * that stopped mid-attempt (killed) lets another send that attempt again.
   */
  claimMs: number;
  /** How often a worker looks for due deliveries that no local emit announced (other replicas', retries). */
  pollMs: number;
}

export const DEFAULT_DELIVERY_OPTIONS: DeliveryOptions = {
  maxInFlight: 64,
  perEndpoint: 8,
  claimMs: 30_000,
  pollMs: 500,
};

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
  log: Logger;
  /** Test-mode endpoints may use http:// (SVC_WEBHOOK_ALLOW_HTTP). */
  allowHttp: boolean;
  options?: Partial<DeliveryOptions>;
}) {
  const options = { ...DEFAULT_DELIVERY_OPTIONS, ...deps.options };
  const inFlight = new Set<Promise<void>>();
  const perEndpoint = new Map<string, number>();
  let pumping: Promise<number> | null = null;
  let again = false;
  let stopped = false;

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
  async function send(row: ClaimedRow, at: Date): Promise<AttemptOutcome> {
    // An operator may have turned plain http off since the endpoint was registered.
    if (row.url.startsWith('http:') && !(row.mode === 'test' && deps.allowHttp))
      return refused('invalid-url', 'plain http:// is not allowed for this endpoint any more');
    let secret: string;
    try {
      secret = deps.sealer.open(row.secret_sealed, row.endpoint_id);
    } catch {
      deps.log.error(
        { endpointId: row.endpoint_id },
        "a webhook endpoint's signing secret does not open (SVC_SEALING_KEY changed?): rotate it",
      );
      return refused('secret-unavailable', 'the signing secret cannot be opened: rotate it');
    }
    const headers = {
      'content-type': 'application/json',
      ...signatureHeaders(secret, row.event_id, row.body, at),
    };
    return deps.sender.send({ url: row.url, headers, body: row.body });
  }

  async function attempt(row: ClaimedRow) {
    const at = deps.clock.now();
    const outcome = await send(row, at);
    const failures = row.failures + (succeeded(outcome) ? 0 : 1);
    const delay = succeeded(outcome) ? null : retryDelayMs(failures);
    const failingSince = await webhooksStore(deps.pool).recordAttempt({
      deliveryId: row.id,
      endpointId: row.endpoint_id,
      at,
      statusCode: outcome.kind === 'response' ? outcome.status : null,
      failure: outcome.kind === 'failure' ? outcome.reason : null,
      latencyMs: Math.round(outcome.latencyMs),
      // PostgreSQL text holds no NUL character; a receiver's answer may.
      excerpt: (outcome.kind === 'response' ? outcome.excerpt : outcome.message).replaceAll(
        '\u0000',
        '\uFFFD',
      ),
      outcome: succeeded(outcome) ? 'succeeded' : delay === null ? 'failed' : 'retry',
      nextAttemptAt: delay === null ? null : new Date(deps.clock.now().getTime() + delay),
    });
    if (!succeeded(outcome)) {
      deps.log.info(
        {
          deliveryId: row.id,
          endpointId: row.endpoint_id,
          status: outcome.kind === 'response' ? outcome.status : outcome.reason,
          failures,
        },
        delay === null ? 'webhook delivery failed for good' : 'webhook attempt failed; retrying later',
      );
    }
    if (failingSince) await disableIfFailing(row, failingSince);
  }

  function start(row: ClaimedRow) {
    perEndpoint.set(row.endpoint_id, (perEndpoint.get(row.endpoint_id) ?? 0) + 1);
    const running = attempt(row)
      .catch((error: unknown) =>
        deps.log.error(
          { err: error, deliveryId: row.id },
          'webhook attempt not recorded; its claim will lapse',
        ),
      )
      .finally(() => {
        inFlight.delete(running);
        const left = (perEndpoint.get(row.endpoint_id) ?? 1) - 1;
        if (left === 0) perEndpoint.delete(row.endpoint_id);
        else perEndpoint.set(row.endpoint_id, left);
        void pump();
      });
    inFlight.add(running);
  }

  /** Claims and starts due deliveries while there is room; answers how many it started. */
  function pump(): Promise<number> {
    if (stopped) return Promise.resolve(0);
    if (pumping) {
      again = true;
      return pumping;
    }
    pumping = (async () => {
      let started = 0;
      try {
        do {
          again = false;
          const room = options.maxInFlight - inFlight.size;
          if (room <= 0) break;
          const now = deps.clock.now();
          const claimed = await webhooksStore(deps.pool).claimDue({
            now,
            claimUntil: new Date(now.getTime() + options.claimMs),
            limit: room,
            perEndpoint: options.perEndpoint,
            inFlight: perEndpoint,
          });
          for (const row of claimed) start(row);
          started += claimed.length;
          if (claimed.length === room) again = true;
        } while (again && !stopped);
      } finally {
        pumping = null;
      }
      return started;
    })();
    return pumping;
  }

  return {
    /** Runs the worker: on every announcement of due deliveries, and every `pollMs`. */
    start: () => {
      deps.outbox.onDue(() => void pump().catch(() => {}));
      const timer = setInterval(
        () =>
          void pump().catch((error: unknown) =>
            deps.log.warn({ err: error }, 'could not claim webhook deliveries; trying again'),
          ),
        options.pollMs,
      );
      timer.unref();
      return async () => {
        stopped = true;
        clearInterval(timer);
        await pumping?.catch(() => {});
        await Promise.allSettled([...inFlight]);
      };
    },

    /** Sends every due delivery and waits for their attempts (tests, the admin CLI). */
    deliverDue: async (): Promise<void> => {
      for (;;) {
        const started = await pump();
        if (inFlight.size === 0 && started === 0) return;
        await Promise.allSettled([...inFlight]);
      }
    },
  };
}

export type WebhookDelivery = ReturnType<typeof createWebhookDelivery>;
