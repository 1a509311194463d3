/**
 * LiveKit tokens per second through the API (key check, daily cap, settings, balance check, room
 * upsert in LiveKit, signing) beside bare AccessToken.toJwt() in the same process: the ratio is the
 * figure. Then LiveKit webhooks handled per second (verification, idempotency, metering).
 *
 *   npm run stack -- up --profile test && npx tsx bench/live-tokens.ts [calls] [concurrency]
 */
import { createHash, randomUUID } from 'node:crypto';
import { AccessToken } from 'livekit-server-sdk';
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { createCustomer } from '../control-plane/test/support.js';
import { report, runConcurrently, useTestStackSettings } from './support.js';

useTestStackSettings();
const calls = Number(process.argv[2] ?? 2_000);
const concurrency = Number(process.argv[3] ?? 16);
const settings = loadSettings(process.env);
const container = await createContainer(settings);
const app = await buildApp(container, { logger: false });
const internal = await buildApp(container, { logger: false, listener: 'internal' });
await app.ready();
const { token } = await createCustomer(container, { plan: 'scale', dailyRequestCap: 10_000_000 });

async function measure(label: string, task: (i: number) => Promise<void>) {
  let next = 0;
  const started = performance.now();
  const latencies = await runConcurrently(calls, concurrency, () => task(next++));
  console.log(report(label, latencies, performance.now() - started));
  return (latencies.length / (performance.now() - started)) * 1000;
}

console.log(`live tokens and webhooks, ${calls} per run, ${concurrency} in flight`);
const bare = await measure('bare AccessToken.toJwt()', async (i) => {
  const at = new AccessToken(settings.SVC_LIVEKIT_API_KEY, settings.SVC_LIVEKIT_API_SECRET, {
    identity: `u${i}`,
    ttl: 7200,
  });
  at.addGrant({ room: 'bench', roomJoin: true, canSubscribe: true, canPublish: false });
  await at.toJwt();
});
const mint = (i: number) =>
  app.inject({
    method: 'POST',
    url: '/v1/realtime/live/tokens',
    headers: { authorization: `Bearer ${token}` },
    payload: { room: `bench-${i % 20}`, identity: `u${i}` },
  });
await measure('warm-up (discarded)', async (i) => void (await mint(i)));
const api = await measure('POST /v1/realtime/live/tokens', async (i) => {
  const response = await mint(i);
  if (response.statusCode !== 200) throw new Error(`mint failed: ${response.body}`);
});
console.log(`ratio of token throughput, API / bare: ${(api / bare).toFixed(3)}`);

// A join and a leave per participant, signed as LiveKit signs them.
const room = (await mint(0)).json().room as string;
const attributes = { 'svc.kind': 'live', 'svc.quality': 'hd', 'svc.publisher': 'false' };
async function signed(event: string, sid: string) {
  const now = Date.now();
  const body = JSON.stringify({
    id: `EV_${randomUUID()}`,
    event,
    createdAt: String(Math.floor(now / 1000)),
    room: { name: room },
    participant: { sid, identity: sid, joinedAtMs: String(now - 60_000), attributes },
  });
  const at = new AccessToken(settings.SVC_LIVEKIT_API_KEY, settings.SVC_LIVEKIT_API_SECRET);
  at.sha256 = createHash('sha256').update(body).digest('base64');
  return { body, authorization: await at.toJwt() };
}
const deliveries = await Promise.all(
  Array.from({ length: calls }, (_, i) =>
    signed(
      i % 2 === 0 ? 'participant_joined' : 'participant_left',
      `PA_${Math.floor(i / 2)}_${randomUUID()}`,
    ),
  ),
);
await measure('LiveKit webhooks handled', async (i) => {
  const { body, authorization } = deliveries[i]!;
  const response = await internal.inject({
    method: 'POST',
    url: '/internal/livekit/webhook',
    headers: { 'content-type': 'application/webhook+json', authorization },
    payload: body,
  });
  if (response.statusCode !== 200) throw new Error(`webhook refused: ${response.body}`);
});
await Promise.all([app.close(), internal.close()]);
await container.close();
