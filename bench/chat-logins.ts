/**
 * Chat logins per second, in one run on one ejabberd, decided by: the control plane, asked by the
 * login's own process (auth_method svc_control_plane, chat.local: the "bridge"); external auth
 * by a program that accepts anyone (the test profile's accept-all.local host,
 * ejabberd/accept-all-auth.mjs); and ejabberd's own internal auth (its bench.local host). Each is
 * warmed up (the control plane's JIT included), then the three take turns, so that the drift of a
 * shared machine hits all. Then the control plane's throughput as a share of the other two, p50/p99
 * of the auth callback itself, and credentials minted per second.
 *
 *   npm run stack -- up --profile test && npx tsx bench/chat-logins.ts [logins] [concurrency]
 */
import { randomBytes } from 'node:crypto';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { api, createCustomer, ejabberdAsOperator } from '../e2e/support/stack.js';
import { type ChatCredential, connect } from '../e2e/support/xmpp.js';
import { report, runConcurrently, useTestStackSettings } from './support.js';

useTestStackSettings();
const logins = Number(process.argv[2] ?? 400);
const concurrency = Number(process.argv[3] ?? 8);
const settings = loadSettings(process.env);
const container = await createContainer(settings);
const customer = await createCustomer(container);

async function timed(
  label: string,
  total: number,
  task: (i: number) => Promise<void>,
  inFlight = concurrency,
): Promise<{ latencies: number[]; perSecond: number; elapsed: number }> {
  let next = 0;
  const started = performance.now();
  const latencies = await runConcurrently(total, inFlight, () => task(next++));
  const elapsed = performance.now() - started;
  console.log(report(label, latencies, elapsed));
  return { latencies, perSecond: (latencies.length / elapsed) * 1000, elapsed };
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

/**
 * A login is over once its session is online. Its close is not waited for: ejabberd 23.01 answers a
 * client's stream close only after a fixed 100 ms pause (ejabberd_c2s:bounce_message_queue), idle
 * time that would cap every kind of auth alike at `concurrency` / 0.1 s. The closes still run on
 * the server meanwhile, and each measurement waits for all of its sessions to be closed.
 */
const closing: Promise<void>[] = [];
const login = async (credential: ChatCredential) => {
  const session = await connect(credential, `r${randomBytes(4).toString('hex')}`);
  closing.push(session.stop());
};
const closed = async () => {
  await Promise.all(closing.splice(0));
};

// ejabberd's own accounts on the internal-auth host, registered through its API (new names each run).
const run = randomBytes(4).toString('hex');
const onHost = (domain: string, i: number, password: string): ChatCredential => {
  const user = `bench-${run}-${i}`;
  return { ...credentials[i]!, user, domain, jid: `${user}@${domain}`, password };
};
const internal: ChatCredential[] = [];
let registering = 0;
await runConcurrently(logins, concurrency, async () => {
  const i = registering++;
  const credential = onHost('bench.local', i, randomBytes(16).toString('hex'));
  const registered = await ejabberdAsOperator(settings, 'register', {
    user: credential.user,
    host: credential.domain,
    password: credential.password,
  });
  if (registered.status !== 200) throw new Error(`register failed: ${await registered.text()}`);
  internal[i] = credential;
});
// The accept-all program's host takes any name and password.
const acceptAll = credentials.map((_, i) => onHost('accept-all.local', i, randomBytes(16).toString('hex')));

/** Rounds in which the ways of authenticating take turns, the order reversed every other round. */
const ROUNDS = 2;
/** Logins of each way before any is measured: enough for the control plane's JIT to settle. */
const WARM_UP = Math.min(200, logins);

/** One run of the same logins and concurrency: how long they took (their sessions' closes apart). */
async function loginRun(label: string, accounts: readonly ChatCredential[]) {
  const { elapsed } = await timed(`logins, ${label}`, logins, (i) => login(accounts[i]!));
  await closed();
  return elapsed;
}
const ways = [
  ['control plane (chat.local)', credentials],
  ['external auth accepting all (accept-all.local)', acceptAll],
  ['ejabberd internal auth (bench.local)', internal],
] as const;
for (const [label, accounts] of ways) {
  await timed(`warm-up, ${label} (discarded)`, WARM_UP, (i) => login(accounts[i]!));
  await closed();
}
const elapsed = ways.map(() => 0);
for (let round = 0; round < ROUNDS; round++) {
  const order = round % 2 === 0 ? [0, 1, 2] : [2, 1, 0];
  for (const index of order) {
    const [label, accounts] = ways[index]!;
    elapsed[index]! += await loginRun(label, accounts);
  }
}
const [controlPlane, trivial, own] = elapsed.map((ms) => ((ROUNDS * logins) / ms) * 1000) as [
  number,
  number,
  number,
];
console.log(
  `logins per second over ${ROUNDS} rounds: control plane ${controlPlane.toFixed(0)}, accept-all ${trivial.toFixed(0)}, internal ${own.toFixed(0)}`,
);
console.log(
  `ratio of login throughput, control plane / accept-all: ${(controlPlane / trivial).toFixed(2)} (>= 0.8 wanted)`,
);
console.log(
  `ratio of login throughput, control plane / internal: ${(controlPlane / own).toFixed(2)} (>= 2 wanted)`,
);

const callback = async (i: number) => {
  const credential = credentials[i]!;
  const internalUrl = `http://${settings.SVC_INTERNAL_HOST}:${settings.SVC_INTERNAL_PORT}`;
  const response = await fetch(`${internalUrl}/internal/ejabberd/auth`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Bearer ${settings.SVC_EJABBERD_AUTH_SECRET}`,
    },
    body: JSON.stringify({
      op: 'auth',
      user: credential.user,
      server: credential.domain,
      password: credential.password,
    }),
  });
  if (!((await response.json()) as { ok: boolean }).ok)
    throw new Error('callback refused a valid credential');
};
// One at a time: the callback's own latency (p50 < 2 ms wanted); then as many in flight as logins.
await timed('auth callback alone, 1 in flight (POST /internal/ejabberd/auth)', logins, callback, 1);
await timed(`auth callback alone, ${concurrency} in flight (POST /internal/ejabberd/auth)`, logins, callback);
await container.close();
