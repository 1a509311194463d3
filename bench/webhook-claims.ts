/**
 * A webhook worker's claim, and the record of its successful attempts, behind a backlog that arrived
 * after an idle spell: the queue was vacuumed empty, so its statistics say it holds nothing, and then
 * a burst of deliveries came for one endpoint. The floor is the same claim and record once the queue
 * is analyzed again. A statement whose plan believes the statistics and reads the whole queue for
 * each row it takes shows as a ratio far above 1.
 *
 * Each claim takes `limit` deliveries, the worker's largest record (`RECORDED`) of them is recorded
 * in the same transaction, and both are rolled back, so the backlog stays for the next claim. The
 * container's clock is thirty-one years ahead, where no test file and no other bench puts its own
 * deliveries, and its endpoint's URL takes nothing: no worker sends what this bench queues.
 *
 *   npm run stack -- up --profile test && npx tsx bench/webhook-claims.ts [limit] [claims]
 */
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { statement } from '../control-plane/src/db/transaction.js';
import { RECORDED_AT_ONCE } from '../control-plane/src/modules/webhooks/delivery.js';
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

const median = (times: number[]) =>
  percentile(
    times.sort((a, b) => a - b),
    50,
  );

/**
 * The medians of `claims` claims of `limit` deliveries of the endpoint, and of the records of their
 * first RECORDED_AT_ONCE as successes, each claim and its record rolled back.
 */
async function claimAndRecordMs(endpointId: string, backlog: number) {
  const expected = Math.min(limit, backlog);
  const times = { claim: [] as number[], record: [] as number[] };
  for (let i = 0; i < claims; i += 1) {
    const now = clock.now();
    const claimedUntil = new Date(now.getTime() + 60_000);
    await inTransaction(container.pool, async (tx) => {
      const store = webhooksStore(tx);
      let started = performance.now();
      const claimed = await store.claimDue({
        now,
        claimUntil: claimedUntil,
        limit,
        rooms: new Map([[endpointId, limit]]),
        unseenRoom: 0,
        skip: [],
        start: endpointId,
      });
      times.claim.push(performance.now() - started);
      if (claimed.length !== expected) throw new Error(`claimed ${claimed.length} of ${expected}`);
      const records = claimed.slice(0, RECORDED_AT_ONCE).map((row) => ({
        claim: { id: row.id, claimedUntil, address: row.address },
        endpointId,
        at: now,
        statusCode: 200,
        latencyMs: 1,
        excerpt: '',
      }));
      // The worker records in a transaction of its own, without the claim's planner setting.
      await tx.query(statement`set local enable_bitmapscan to default`);
      started = performance.now();
      await store.recordSuccesses(records);
      times.record.push(performance.now() - started);
      const left: number = await tx.oneFirst(
        statement`
          select count(*)::int as left from webhook_due where endpoint_id = ${endpointId}`,
      );
      if (left !== backlog - records.length)
        throw new Error(`recorded ${backlog - left} of ${records.length}`);
      throw rolledBack;
    }).catch((error: unknown) => {
      if (error !== rolledBack) throw error;
    });
  }
  return { claim: median(times.claim), record: median(times.record) };
}

console.log(
  `a claim of ${limit} behind one endpoint's backlog, and the record of ${Math.min(limit, RECORDED_AT_ONCE)} of them, median of ${claims}`,
);
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
      const afterIdle = await claimAndRecordMs(endpoint.id, backlog);
      await container.pool.query(statement`analyze webhook_due`);
      const analyzed = await claimAndRecordMs(endpoint.id, backlog);
      for (const step of ['claim', 'record'] as const) {
        console.log(
          `  ${step.padEnd(6)} behind ${String(backlog).padStart(6)}: after an idle spell ${afterIdle[step].toFixed(1)} ms, ` +
            `analyzed (the floor) ${analyzed[step].toFixed(1)} ms, ratio ${(afterIdle[step] / analyzed[step]).toFixed(2)}`,
        );
      }
    } finally {
      // Its deliveries and their queue rows go with it.
      await container.webhooks.remove(scope, endpoint.id);
    }
  }
} finally {
  await container.close();
}
