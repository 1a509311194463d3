/**
 * Chat logins per second through ejabberd's external auth (the bridge asking the control plane),
 * beside ejabberd's own internal auth on the same server (the test profile's bench.local host),
 * in one run; p50/p99 of the auth callback itself; and credentials minted per second.
 *
 *   npm run stack -- up --profile test && npx tsx bench/chat-logins.ts [logins] [concurrency]
 */
import { randomBytes } from 'node:crypto';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { api, createCustomer } from '../e2e/support/stack.js';
import { type ChatCredential, connect } from '../e2e/support/xmpp.js';
import { report, runConcurrently, useTestStackSettings } from './support.js';

useTestStackSettings();
const logins = Number(process.argv[2] ?? 400);
const concurrency = Number(process.argv[3] ?? 8);
const settings = loadSettings(process.env);
const container = await createContainer(settings);
const customer = await createCustomer(container);

async function timed(label: string, total: number, task: (i: number) => Promise<void>) {
  let next = 0;
  const started = performance.now();
  const latencies = await runConcurrently(total, concurrency, () => task(next++));
  console.log(report(label, latencies, performance.now() - started));
  return latencies;
}

console.log(`chat logins: ${logins} per run, ${concurrency} in flight`);
const credentials: ChatCredential[] = [];
await timed('credentials minted (POST /v1/realtime/chat/tokens)', logins, async (i) => {
  const response = await api<ChatCredential>(customer, 'POST', '/v1/realtime/chat/tokens', {
    user_id: `bench-${i}`,
  });
  if (response.status !== 200) throw new Error(`mint failed: ${response.status}`);
  credentials[i] = response.body;
});

const login = async (credential: ChatCredential) => {
  const session = await connect(credential, `r${randomBytes(4).toString('hex')}`);
  await session.stop();
};

// ejabberd's own accounts on the internal-auth host, registered through its API (new names each run).
const run = randomBytes(4).toString('hex');
const internal: ChatCredential[] = [];
let registering = 0;
await runConcurrently(logins, concurrency, async () => {
  const i = registering++;
  const user = `bench-${run}-${i}`;
  const password = randomBytes(16).toString('hex');
  const registered = await fetch(`${settings.SVC_EJABBERD_API_URL}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user, host: 'bench.local', password }),
  });
  if (registered.status !== 200) throw new Error(`register failed: ${await registered.text()}`);
  internal[i] = { ...credentials[i]!, user, domain: 'bench.local', jid: `${user}@bench.local`, password };
});

await timed('warm-up (discarded)', Math.min(50, logins), (i) => login(credentials[i]!));
const external = await timed('logins, external auth (bridge + control plane)', logins, (i) =>
  login(credentials[i]!),
);
const own = await timed('logins, ejabberd internal auth', logins, (i) => login(internal[i]!));
const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
console.log(`ratio of login throughput, external / internal: ${(mean(own) / mean(external)).toFixed(2)}`);

await timed('auth callback alone (POST /internal/ejabberd/auth)', logins, async (i) => {
  const credential = credentials[i]!;
  const response = await fetch(`${settings.SVC_PUBLIC_URL}/internal/ejabberd/auth`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${settings.SVC_INTERNAL_SECRET}` },
    body: JSON.stringify({
      op: 'auth',
      user: credential.user,
      server: credential.domain,
      password: credential.password,
    }),
  });
  if (!((await response.json()) as { ok: boolean }).ok)
    throw new Error('callback refused a valid credential');
});
await container.close();
