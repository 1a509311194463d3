/**
 * A webhook worker's claim behind a backlog that arrived after an idle spell: the queue was vacuumed
 * empty, so its statistics say it holds nothing, and then a burst of deliveries came for one endpoint.
 * The floor is the same claim once the queue is analyzed again. A claim whose plan believes the
 * statistics and reads the whole queue for each row it takes shows as a ratio far above 1.
 *
 * Each claim takes `limit` deliveries and is rolled back, so the backlog stays for the next one. The
 * container's clock is thirty-one years ahead, where no test file and no other bench puts its own
 * deliveries, and its endpoint's URL takes nothing: no worker sends what this bench queues.
 *
 *   npm run stack -- up --profile test && npx tsx bench/webhook-claims.ts [limit] [claims]
 */
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { statement } from '../control-plane/src/db/transaction.js';
import { webhooksStore } from '../control-plane/src/modules/webhooks/store.js';
import { inTransaction } from '../control-plane/src/platform/transaction.js';
import { clockYearsAhead, createCustomer } from '../control-plane/test/support.js';
import { percentile, useTestStackSettings } from './support.js';

useTestStackSettings();
const limit = Number(process.argv[2] ?? 512);
const claims = Number(process.argv[3] ?? 15);
const BACKLOGS = [2_000, 20_000];

const clock = clockYearsAhead(31);
const container = await createContainer(loadSettings(process.env), { clock });
const { app } = await createCustomer(container);
const scope = { appId: app.id, mode: 'test' as const };
const rolledBack = new Error('rolled back');

/** The median of `claims` claims of `limit` deliveries of the endpoint, each rolled back. */
async function claimMs(endpointId: string, expected: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < claims; i += 1) {
    const now = clock.now();
    const started = performance.now();
    await inTransaction(container.pool, async (tx) => {
      const claimed = await webhooksStore(tx).claimDue({
        now,
        claimUntil: new Date(now.getTime() + 60_000),
        limit,
        rooms: new Map([[endpointId, limit]]),
        unseenRoom: 0,
        skip: [],
        start: endpointId,
      });
      times.push(performance.now() - started);
      if (claimed.length !== expected) throw new Error(`claimed ${claimed.length} of ${expected}`);
      throw rolledBack;
    }).catch((error: unknown) => {
      if (error !== rolledBack) throw error;
    });
  }
  return percentile(
    times.sort((a, b) => a - b),
    50,
  );
}

console.log(`a claim of ${limit} behind one endpoint's backlog, median of ${claims}`);
try {
  for (const backlog of BACKLOGS) {
    const endpoint = await container.webhooks.create(scope, {
      url: 'http://127.0.0.1:9/hook',
      event_types: ['buzz.created'],
    });
    try {
      await container.pool.query(statement`vacuum (analyze) webhook_due`);
      await inTransaction(container.pool, async (tx) => {
        for (let i = 0; i < backlog; i += 1)
          await container.outbox.emit(tx, { ...scope, type: 'buzz.created', data: { i } });
      });
      const expected = Math.min(limit, backlog);
      const afterIdle = await claimMs(endpoint.id, expected);
      await container.pool.query(statement`analyze webhook_due`);
      const analyzed = await claimMs(endpoint.id, expected);
      console.log(
        `  behind ${String(backlog).padStart(6)}: after an idle spell ${afterIdle.toFixed(1)} ms, ` +
          `analyzed (the floor) ${analyzed.toFixed(1)} ms, ratio ${(afterIdle / analyzed).toFixed(2)}`,
      );
    } finally {
      // Its deliveries and their queue rows go with it.
      await container.webhooks.remove(scope, endpoint.id);
    }
  }
} finally {
  await container.close();
}
