/**
 * Shield tickets issued per second through the whole pipeline (publishable key, daily cap, the
 * per-minute rate, the viewer set, the verdict counters in Redis, signing), in one process.
 *
 *   npm run stack -- up --profile test && npx tsx bench/shield-tickets.ts [tickets] [concurrency]
 */
import { randomInt } from 'node:crypto';
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { createCustomer } from '../control-plane/test/support.js';
import { report, runConcurrently, useTestStackSettings } from './support.js';

useTestStackSettings();
const tickets = Number(process.argv[2] ?? 5_000);
const concurrency = Number(process.argv[3] ?? 16);
const container = await createContainer(loadSettings(process.env));
const app = await buildApp(container, { logger: false });
await app.ready();
const { app: created } = await createCustomer(container, { plan: 'scale', dailyRequestCap: 10_000_000 });
const { publishable_key: key } = await container.realtime.setup({ appId: created.id, mode: 'test' });

let next = 0;
const started = performance.now();
const latencies = await runConcurrently(tickets, concurrency, async () => {
  const i = next++;
  const response = await app.inject({
    method: 'POST',
    url: '/v1/realtime/shield/ticket',
    headers: { 'x-publishable-key': key, 'user-agent': 'Mozilla/5.0 Chrome/126.0' },
    // Addresses from the loopback range, few tickets each, so the per-minute rate never refuses.
    remoteAddress: `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`,
    payload: { subject: `viewer-${i}`, scope: `stream-${i % 50}` },
  });
  if (response.statusCode !== 200) throw new Error(`ticket refused: ${response.body}`);
});
console.log(`shield tickets, ${tickets} issued, ${concurrency} in flight`);
console.log(
  report('tickets issued (POST /v1/realtime/shield/ticket)', latencies, performance.now() - started),
);
await app.close();
await container.close();
