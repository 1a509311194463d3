import type { FastifyBaseLogger } from 'fastify';
import type { Container } from './container.js';
import { SPEND_GUARD_EVERY_MS } from './modules/live/service.js';
import { VOCABULARY_LOCK_WAIT_MS } from './modules/social/schema.js';
import { TEST_OBJECT_DAYS } from './modules/storage/schema.js';
import { ACCRUAL_FLUSH_MS } from './platform/accrual.js';
import { leaseKey, withLease } from './platform/lease.js';
import { parseUsd } from './platform/money.js';

/** How often the slow background work runs. */
export const MAINTENANCE_EVERY_MS = 60_000;
/** How often live balances are compared with the balance.low threshold. */
export const BALANCE_LOW_EVERY_MS = 5_000;
/** Thumbnails left over by failed writes are few: an hourly look at the bucket is plenty. */
const HOUR_MS = 3_600_000;

/** The lease of a task run by one replica at a time. */
const taskLease = (taskName: string) => `maintenance:${taskName}`;
/** The name of the task that prunes `rows`. */
export const pruningTaskName = (rows: string) => `${rows} pruning`;
/** The Redis key of a leased task's lease: a test holds it to keep the stack's own replica off. */
export const taskLeaseKey = (taskName: string) => leaseKey(taskLease(taskName));

interface Task {
  name: string;
  everyMs: number;
  /** One replica at a time runs it (a lease renewed while it runs); else every replica does. */
  leased?: boolean;
  run(): Promise<unknown>;
}

/**
 * Background work of the control plane, each task at start and then on its own period: accrued usage
 * flushed to PostgreSQL (every second), the spend guard (every 5 s), LiveKit reconciliation, the
 * storage bucket's setup (until it succeeds), storage expiry, the daily stored-bytes metering and the
 * user token signing key's rotation (every minute), balance.low events (every 5 s), pruning LiveKit webhook ids, idempotency keys,
 * webhook events and bookkeeping rows (usage batch claims, ended live sessions, past months' active
 * users, metered days, expired dashboard sessions and invitations) past their retention, and search terms no name holds; and the webhook delivery worker, which runs continuously. Each
 * task is idempotent and safe on several replicas; the sweeps run on one replica at a time (a lease).
 * A failing one is logged and runs again at its next turn, never stopping the others. A task never
 * overlaps itself.
 */
export function startMaintenance(container: Container, log: FastifyBaseLogger): () => Promise<void> {
  let bucketReady = false;
  /** A leased sweep deleting rows past their use, logging how many went. */
  const pruning = (rows: string, what: string, prune: () => Promise<{ pruned: number }>): Task => ({
    name: pruningTaskName(rows),
    everyMs: MAINTENANCE_EVERY_MS,
    leased: true,
    run: async () => {
      const { pruned } = await prune();
      if (pruned > 0) log.info({ pruned }, `pruned ${what}`);
    },
  });
  const tasks: Task[] = [
    { name: 'accrued usage flush', everyMs: ACCRUAL_FLUSH_MS, run: () => container.accrual.flush() },
    {
      name: 'spend guard',
      everyMs: SPEND_GUARD_EVERY_MS,
      run: async () => {
        const result = await container.live.guardSpend();
        if (result.removed > 0) log.info(result, 'removed live participants of accounts that cannot pay');
      },
    },
    {
      name: 'live reconciliation',
      everyMs: MAINTENANCE_EVERY_MS,
      run: async () => {
        const result = await container.live.reconcile();
        if (result.closed > 0) log.info(result, 'closed live sessions whose leave was never reported');
      },
    },
    {
      name: 'storage bucket setup',
      everyMs: MAINTENANCE_EVERY_MS,
      run: async () => {
        if (bucketReady) return;
        await container.objects.ensureBucket({ testPrefix: 'test/', testObjectDays: TEST_OBJECT_DAYS });
        bucketReady = true;
        log.info('storage bucket ready');
      },
    },
    {
      name: 'storage expiry',
      everyMs: MAINTENANCE_EVERY_MS,
      leased: true,
      run: () => container.storage.sweep(),
    },
    {
      name: 'stored bytes metering',
      everyMs: MAINTENANCE_EVERY_MS,
      leased: true,
      run: () => container.storage.meterStoredBytes(),
    },
    {
      name: 'orphaned thumbnails',
      everyMs: HOUR_MS,
      leased: true,
      run: async () => {
        const removed = await container.media.sweepThumbnails();
        if (removed > 0) log.info({ removed }, 'removed thumbnails no media shows');
      },
    },
    pruning('live webhook ids', 'LiveKit webhook ids past their retention', () =>
      container.live.pruneEvents(),
    ),
    pruning('moment views', 'moment views of past days', () => container.moments.pruneViews()),
    {
      name: 'profile vocabulary pruning',
      everyMs: MAINTENANCE_EVERY_MS,
      leased: true,
      run: async () => {
        const { pruned, putOff } = await container.social.pruneVocabulary();
        if (pruned > 0) log.info({ pruned }, 'pruned search terms no name holds any more');
        // Always put off (long profile writes, or a vacuum of the words), the terms to look at pile up.
        if (putOff)
          log.info(
            `put the search terms sweep off: profile writes held the words for ${VOCABULARY_LOCK_WAIT_MS} ms`,
          );
      },
    },
    pruning('idempotency keys', 'idempotency keys past their 24 hours', () => container.idempotency.prune()),
    pruning('webhook events', 'webhook events past their 30 days', () => container.webhooks.pruneEvents()),
    pruning('deleted webhook endpoints', 'deliveries of deleted webhook endpoints', () =>
      container.webhooks.purgeDeleted(),
    ),
    pruning('messaging sends', 'sends past their 30 days and expired codes', () =>
      container.messaging.prune(),
    ),
    pruning('usage flush claims', "accounts' claims of usage batches applied over a day ago", () =>
      container.accrual.prune(),
    ),
    pruning(
      'ended live sessions',
      'live sessions ended, and qualities of none reported, over 30 days ago',
      () => container.live.pruneEndedSessions(),
    ),
    pruning('monthly active users', 'chat users counted active before last month', () =>
      container.chat.pruneMonthlyActiveUsers(),
    ),
    pruning('metered days', 'stored bytes metering claims over a week old', () =>
      container.storage.pruneMeteredDays(),
    ),
    pruning('dashboard sessions', 'dashboard sessions and invitations expired over a month ago', () =>
      container.dashboard.pruneExpired(),
    ),
    {
      name: 'user token key rotation',
      everyMs: MAINTENANCE_EVERY_MS,
      leased: true,
      run: async () => {
        const rotated = await container.userTokens.rotateIfDue();
        if (rotated) log.info(rotated, 'added the next user token signing key');
      },
    },
    {
      name: 'balance.low events',
      everyMs: BALANCE_LOW_EVERY_MS,
      leased: true,
      run: async () => {
        const told = await container.billing.notifyLowBalances(lowBalanceMicros);
        if (told > 0) log.info({ accounts: told }, 'told apps their live balance is low');
      },
    },
  ];
  const lowBalanceMicros = parseUsd(container.settings.SVC_BALANCE_LOW_USD);
  const stopDelivery = container.webhookDelivery.start();
  const runOnce = (task: Task) =>
    task.leased ? withLease(container.redis, taskLease(task.name), task.everyMs, task.run) : task.run();
  const running = new Set<Promise<unknown>>();
  const timers = tasks.map((task) => {
    let busy = false;
    const turn = () => {
      if (busy) return;
      busy = true;
      const done = runOnce(task)
        .catch((error: unknown) =>
          log.warn({ err: error }, `${task.name} failed; trying again at its next turn`),
        )
        .finally(() => {
          busy = false;
          running.delete(done);
        });
      running.add(done);
    };
    turn();
    const timer = setInterval(turn, task.everyMs);
    timer.unref();
    return timer;
  });
  /** Stops the timers and the webhook worker, and waits for the turns and attempts under way. */
  return async () => {
    for (const timer of timers) clearInterval(timer);
    await Promise.allSettled([...running, stopDelivery()]);
  };
}
