/**
 * A shield report over `days` days of an app that saw `pairs` (scope, address) pairs a day: how long
 * it takes, and how long it holds Redis from everyone else, beside the floor of the same client's
 * round trips with no report running.
 *
 * The days' hits are written straight into Redis, as tickets would leave them, under an app id of
 * their own that expires within the hour: a long tail of one or two hits and twenty busy pairs, or
 * with `even`, one or two hits each, the pairs with two changing by day (no pair stands out, so the
 * report reads each day deeper: its worst case). Another Redis client PINGs in a loop from a thread
 * of its own, so that the report's work on this thread does not delay it: its slowest round trip
 * while the report runs is how long Redis was held.
 *
 *   npm run stack -- up --profile test && npx tsx bench/shield-report.ts [pairs] [days] [runs] [even]
 */
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { utcDay } from '../control-plane/src/platform/clock.js';
import { useTestStackSettings } from './support.js';

useTestStackSettings();
const pairs = Number(process.argv[2] ?? 50_000);
const days = Number(process.argv[3] ?? 30);
const runs = Number(process.argv[4] ?? 5);
const even = process.argv[5] === 'even';
const container = await createContainer(loadSettings(process.env));
const scope = { appId: `app_benchreport${pairs}x${days}${even ? 'even' : ''}`, mode: 'test' as const };
const base = `svc:shield:${scope.appId}:${scope.mode}`;
const now = container.clock.now();
const dayList = Array.from({ length: days }, (_, i) => utcDay(new Date(now.getTime() - i * 86_400_000)));

for (const [dayIndex, day] of dayList.entries()) {
  const key = `${base}:hits:${day}`;
  if (await container.redis.exists(key)) continue;
  for (let start = 0; start < pairs; start += 5_000) {
    const scored: (string | number)[] = [];
    for (let i = start; i < Math.min(pairs, start + 5_000); i += 1)
      scored.push(
        // Spread evenly, which pairs have two hits moves from day to day.
        i < 20 && !even ? 1_000 + i : 1 + ((i + (even ? dayIndex : 0)) % 3 === 0 ? 1 : 0),
        `stream-${i % 200}\t${i.toString(16).padStart(12, '0')}`,
      );
    await container.redis.zadd(key, ...scored);
  }
  await container.redis.expire(key, 3_600);
}

/** [0]: 1 while the prober runs, 2 to stop it; [1]: its slowest round trip so far, in µs. */
const probe = new Int32Array(new SharedArrayBuffer(8));
const prober = new Worker(
  `
  const { parentPort, workerData } = require('node:worker_threads');
  const { Redis } = require(workerData.ioredis);
  const probe = new Int32Array(workerData.probe);
  const redis = new Redis(workerData.url);
  (async () => {
    await redis.ping();
    parentPort.postMessage('connected');
    while (Atomics.load(probe, 0) !== 2) {
      if (Atomics.load(probe, 0) === 0) { await new Promise((resolve) => setTimeout(resolve, 1)); continue; }
      const started = performance.now();
      await redis.ping();
      const took = Math.round((performance.now() - started) * 1000);
      if (took > Atomics.load(probe, 1)) Atomics.store(probe, 1, took);
    }
    redis.disconnect();
  })();`,
  {
    eval: true,
    workerData: {
      probe: probe.buffer,
      url: process.env.SVC_REDIS_URL,
      ioredis: fileURLToPath(import.meta.resolve('ioredis')),
    },
  },
);

await new Promise((resolve) => prober.once('message', resolve));

/** The prober's slowest round trip, in ms, while `work` runs. */
async function slowestPingDuring(work: () => Promise<unknown>): Promise<number> {
  Atomics.store(probe, 1, 0);
  Atomics.store(probe, 0, 1);
  await new Promise((resolve) => setTimeout(resolve, 20));
  await work();
  Atomics.store(probe, 0, 0);
  return Atomics.load(probe, 1) / 1_000;
}

console.log(
  `shield report of ${days} days, ${pairs} (scope, address) pairs a day${even ? ', hits spread evenly' : ''}, ${runs} runs`,
);
for (let run = 0; run < runs; run += 1) {
  let took = 0;
  const held = await slowestPingDuring(async () => {
    const started = performance.now();
    await container.shield.report(scope, days);
    took = performance.now() - started;
  });
  // The floor: as long again with no report.
  const floor = await slowestPingDuring(() => new Promise((resolve) => setTimeout(resolve, took)));
  console.log(
    `  report ${took.toFixed(0)} ms; another client's slowest PING meanwhile ${held.toFixed(1)} ms,` +
      ` ${floor.toFixed(1)} ms without a report (${(held / floor).toFixed(1)}×)`,
  );
}
Atomics.store(probe, 0, 2);
await prober.terminate();
await container.close();
