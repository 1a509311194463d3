/**
 * The single-node stack (test profile) beside the clustered one (scale profile: two control planes,
 * two ejabberd and two LiveKit nodes behind HAProxy), in one run, each through its own public URLs:
 * chat logins (full XMPP WebSocket logins, credentials minted first), priced calls (a live key's
 * upload reservation: key check, daily cap, balance, then the write, usage and debit in one
 * transaction), live tokens, and a floor (GET /healthz) that shows what the proxy itself costs.
 * Each phase runs in rounds taken in turns by the profiles, so that the shared machine's drift falls
 * on both alike. Then each profile's processes' RSS, PostgreSQL commits and Redis commands per second
 * during the priced phase, and chat logins on one ejabberd node of the cluster (reached directly)
 * beside the single node and the two-node cluster: the session table's replication cost.
 *
 *   npm run stack -- up --profile test && npm run stack -- up --profile scale
 *   npx tsx bench/scale.ts [seconds-per-phase=20] [concurrency=16]
 */
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadSettings } from '../control-plane/src/config/load.js';
import type { Settings } from '../control-plane/src/config/schema.js';
import { type Container, createContainer } from '../control-plane/src/container.js';
import { statement } from '../control-plane/src/db/transaction.js';
import { createCustomer } from '../control-plane/test/support.js';
import { type ChatCredential, connect } from '../e2e/support/xmpp.js';
import { loadProfileEnv } from '../infra/src/env-file.js';
import { stackPaths } from '../infra/src/paths.js';
import type { Profile } from '../infra/src/profile.js';
import { procKiB, procStatFields, runningRecords } from '../infra/src/run-records.js';
import { instancesOf } from '../infra/src/servers/types.js';
import { type Figures, figures, type Run, runConcurrently, secondsSince } from './support.js';

const seconds = Number(process.argv[2] ?? 20);
const concurrency = Number(process.argv[3] ?? 16);
/** Each phase is split into this many rounds per profile, taken in turns. */
const ROUNDS = 2;
const roundMs = (seconds * 1000) / ROUNDS;
/** A discarded warm-up before each profile's first round of a phase. */
const WARM_UP_MS = 2_000;
/** Chat credentials minted per profile; the logins go through them in turn. */
const CREDENTIALS = 600;
/** Live accounts for the priced calls: the balance row lock of one would be the limit. */
const PRICED_ACCOUNTS = 16;
const LOGIN_TIMEOUT_MS = 10_000;
/**
 * PostgreSQL 15 backends send their counters at most once a second, and one that goes idle with
 * some unsent sends them within 10 s (PGSTAT_IDLE_INTERVAL): pg_stat_database is read after this
 * quiet time, so that it holds everything done before.
 */
const PG_STATS_SETTLE_MS = 11_000;
/** The quiet window in which each database's and Redis's background rate is measured. */
const IDLE_WINDOW_MS = 10_000;

interface Target {
  profile: Profile;
  label: string;
  settings: Settings;
  container: Container;
  /** A test key (chat, live) and live keys with a balance (priced calls). */
  token: string;
  liveTokens: string[];
  credentials: ChatCredential[];
}

function settingsOf(profile: Profile): Settings {
  return loadSettings({ ...process.env, ...loadProfileEnv(profile), SVC_LOG_LEVEL: 'silent' });
}

async function call(
  target: Target,
  token: string,
  method: 'GET' | 'POST',
  path: string,
  body?: object,
): Promise<unknown> {
  const response = await fetch(`${target.settings.SVC_PUBLIC_URL}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 200)}`);
  return text === '' ? undefined : JSON.parse(text);
}

// ----- load -------------------------------------------------------------------------------------

interface Outcome extends Run {
  errors: number;
  firstError?: string;
}

/** Runs `task` with `concurrency` in flight for `ms`; failures are counted, not timed. */
async function runFor(ms: number, task: (i: number) => Promise<void>): Promise<Outcome> {
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  let next = 0;
  const started = performance.now();
  const deadline = started + ms;
  const worker = async () => {
    while (performance.now() < deadline) {
      const i = next++;
      const began = performance.now();
      try {
        await task(i);
        latencies.push(performance.now() - began);
      } catch (error) {
        errors += 1;
        firstError ??= (error as Error).message;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { elapsed: performance.now() - started, latencies, errors, ...(firstError ? { firstError } : {}) };
}

interface Measured extends Figures {
  count: number;
  errors: number;
  firstError?: string;
  /** The rounds' summed time, in ms. */
  elapsed: number;
}

function summarize(outcomes: Outcome[]): Measured {
  const firstError = outcomes.find((outcome) => outcome.firstError)?.firstError;
  return {
    ...figures(outcomes),
    count: outcomes.reduce((sum, outcome) => sum + outcome.latencies.length, 0),
    errors: outcomes.reduce((sum, outcome) => sum + outcome.errors, 0),
    elapsed: outcomes.reduce((sum, outcome) => sum + outcome.elapsed, 0),
    ...(firstError ? { firstError } : {}),
  };
}

/** One way of loading one profile: its task, and what to do after each round (wait for closes). */
interface Lane {
  name: string;
  task: (i: number) => Promise<void>;
  after?: () => Promise<void>;
}

/** A warm-up per lane, then ROUNDS rounds of each lane in turn. */
async function phase(title: string, lanes: Lane[]): Promise<Map<string, Measured>> {
  const started = performance.now();
  const outcomes = new Map<string, Outcome[]>(lanes.map((lane) => [lane.name, []]));
  for (const lane of lanes) {
    await runFor(WARM_UP_MS, lane.task);
    await lane.after?.();
  }
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const lane of lanes) {
      outcomes.get(lane.name)!.push(await runFor(roundMs, lane.task));
      await lane.after?.();
    }
  }
  console.log(`  ${title} done (${secondsSince(started)} s)`);
  return new Map([...outcomes].map(([name, runs]) => [name, summarize(runs)]));
}

// ----- chat -------------------------------------------------------------------------------------

/**
 * A login is over once its session is online; its close is not waited for (ejabberd 23.01 answers
 * a client's stream close only after a 100 ms pause, as bench/chat-logins.ts explains). The closes
 * run on meanwhile and each round waits for all of them after its clock stops.
 */
function chatLane(name: string, target: Target, wsUrl?: string): Lane {
  const closing: Promise<void>[] = [];
  return {
    name,
    task: async (i) => {
      const minted = target.credentials[i % target.credentials.length]!;
      const credential = wsUrl ? { ...minted, ws: wsUrl } : minted;
      let timer: NodeJS.Timeout | undefined;
      const session = await Promise.race([
        connect(credential, `r${randomBytes(4).toString('hex')}`),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('login took over 10 s')), LOGIN_TIMEOUT_MS);
        }),
      ]).finally(() => clearTimeout(timer));
      closing.push(session.stop());
    },
    after: async () => {
      await Promise.all(closing.splice(0));
    },
  };
}

async function mintCredentials(target: Target): Promise<ChatCredential[]> {
  const run = randomBytes(3).toString('hex');
  const credentials: ChatCredential[] = [];
  let next = 0;
  await runConcurrently(CREDENTIALS, concurrency, async () => {
    const i = next++;
    credentials[i] = (await call(target, target.token, 'POST', '/v1/realtime/chat/tokens', {
      user_id: `scale-${run}-${i}`,
    })) as ChatCredential;
  });
  return credentials;
}

// ----- what the stack's processes and stores show ---------------------------------------------

interface Counters {
  xactCommit: number;
  redisCommands: number;
  at: number;
}

async function counters(container: Container): Promise<Counters> {
  const [xactCommit, info] = await Promise.all([
    container.pool.oneFirst(
      statement`select xact_commit from pg_stat_database where datname = current_database()`,
    ),
    container.redis.info('stats'),
  ]);
  const redisCommands = /total_commands_processed:(\d+)/.exec(info)?.[1];
  return { xactCommit: Number(xactCommit), redisCommands: Number(redisCommands), at: performance.now() };
}

/** Every process's parent, from /proc/<pid>/stat. */
function parents(): Map<number, number> {
  const map = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const ppid = procStatFields(entry)?.[1];
    if (ppid !== undefined) map.set(Number(entry), Number(ppid));
  }
  return map;
}

function descendants(pid: number, parentOf: Map<number, number>): number[] {
  const children = new Map<number, number[]>();
  for (const [child, parent] of parentOf) children.set(parent, [...(children.get(parent) ?? []), child]);
  const found: number[] = [];
  const stack = [pid];
  while (stack.length > 0) {
    for (const child of children.get(stack.pop()!) ?? []) {
      found.push(child);
      stack.push(child);
    }
  }
  return found;
}

interface Memory {
  unit: string;
  pid: number;
  /** VmRSS of the unit's own process. */
  own: number;
  /** PSS of the process and its descendants: shared pages (PostgreSQL's buffers, code) split among them. */
  tree: number;
  children: number;
}

function memory(profile: Profile): Memory[] {
  const parentOf = parents();
  return runningRecords(stackPaths(profile).runDir).map((record) => {
    const children = descendants(record.pid, parentOf);
    return {
      unit: record.server,
      pid: record.pid,
      own: procKiB(record.pid, 'status', 'VmRSS') ?? 0,
      tree: [record.pid, ...children].reduce(
        (sum, pid) => sum + (procKiB(pid, 'smaps_rollup', 'Pss') ?? 0),
        0,
      ),
      children: children.length,
    };
  });
}

// ----- the run ----------------------------------------------------------------------------------

async function prepare(profile: Profile, label: string): Promise<Target> {
  const settings = settingsOf(profile);
  const container = await createContainer(settings);
  const { token } = await createCustomer(container, { plan: 'scale', dailyRequestCap: 10_000_000 });
  const liveTokens = await Promise.all(
    Array.from({ length: PRICED_ACCOUNTS }, async () => {
      const customer = await createCustomer(container, {
        plan: 'scale',
        mode: 'live',
        dailyRequestCap: 10_000_000,
        balanceMicros: 1_000_000_000,
      });
      return customer.token;
    }),
  );
  const target: Target = { profile, label, settings, container, token, liveTokens, credentials: [] };
  const started = performance.now();
  target.credentials = await mintCredentials(target);
  console.log(
    `  ${label}: ${settings.SVC_PUBLIC_URL}, ${settings.SVC_CHAT_WS_URL}; ${target.credentials.length} chat credentials minted in ${secondsSince(started)} s`,
  );
  return target;
}

console.log(
  `scale bench: ${seconds} s per phase and profile (${ROUNDS} rounds in turns, ${WARM_UP_MS / 1000} s warm-up each), ${concurrency} in flight, node ${process.version}`,
);
const single = await prepare('test', 'single');
const cluster = await prepare('scale', 'scale');
const targets = [single, cluster];
const memoryBefore = new Map(targets.map((target) => [target.profile, memory(target.profile)]));

const floor = await phase(
  'floor (GET /healthz)',
  targets.map((target) => ({
    name: target.label,
    task: async () => void (await call(target, target.token, 'GET', '/healthz')),
  })),
);

const oneNode = instancesOf('scale')[0]!;
const oneNodeWs = `ws://127.0.0.1:${oneNode.ports.ejabberdWebSocket}/ws`;
const chat = await phase('chat logins', [
  chatLane(single.label, single),
  chatLane(cluster.label, cluster),
  chatLane('scale, ejabberd-a only', cluster, oneNodeWs),
]);

// Priced calls, with PostgreSQL's commits and Redis's commands counted around them.
await sleep(PG_STATS_SETTLE_MS);
const idleFrom = await Promise.all(targets.map((target) => counters(target.container)));
await sleep(IDLE_WINDOW_MS);
const pricedFrom = await Promise.all(targets.map((target) => counters(target.container)));
const priced = await phase(
  'priced calls (POST /v1/storage/uploads, live keys)',
  targets.map((target) => ({
    name: target.label,
    task: async (i) => {
      const token = target.liveTokens[i % target.liveTokens.length]!;
      await call(target, token, 'POST', '/v1/storage/uploads', {
        name: 'bench.txt',
        content_type: 'text/plain',
        size_bytes: 5,
      });
    },
  })),
);
await sleep(PG_STATS_SETTLE_MS);
const pricedTo = await Promise.all(targets.map((target) => counters(target.container)));

const live = await phase(
  'live tokens',
  targets.map((target) => ({
    name: target.label,
    task: async (i) =>
      void (await call(target, target.token, 'POST', '/v1/realtime/live/tokens', {
        room: `scale-bench-${i % 20}`,
        identity: `u${i}`,
      })),
  })),
);
const memoryAfter = new Map(targets.map((target) => [target.profile, memory(target.profile)]));

// ----- the report -------------------------------------------------------------------------------

const num = (value: number, width: number, digits = 0) =>
  (Number.isFinite(value) ? value.toFixed(digits) : '-').padStart(width);
const cell = (m: Measured) =>
  `${num(m.perSecond, 7)} ${num(m.p50, 7, 1)} ${num(m.p99, 7, 1)} ${num(m.errors, 4)}`;
const header = `${'per second, latency in ms'.padEnd(34)}${'single: /s     p50     p99  err'.padStart(34)}  ${'scale:  /s     p50     p99  err'.padStart(31)}  scale/single`;

console.log(`\n${header}`);
const rows: [string, Map<string, Measured>][] = [
  ['floor: GET /healthz', floor],
  ['chat logins (XMPP over WebSocket)', chat],
  ['priced calls (upload reservation)', priced],
  ['live tokens', live],
];
for (const [label, results] of rows) {
  const a = results.get(single.label)!;
  const b = results.get(cluster.label)!;
  console.log(`${label.padEnd(34)}   ${cell(a)}   ${cell(b)}  ${num(b.perSecond / a.perSecond, 12, 2)}`);
}
const errorLines = rows.flatMap(([label, results]) =>
  [...results].filter(([, m]) => m.firstError).map(([lane, m]) => `  ${label}, ${lane}: ${m.firstError}`),
);
if (errorLines.length > 0) console.log(`first error of each failing lane:\n${errorLines.join('\n')}`);

const chatSingle = chat.get(single.label)!;
const chatOne = chat.get('scale, ejabberd-a only')!;
const chatBoth = chat.get(cluster.label)!;
console.log('\nchat logins: one ejabberd node vs the two-node cluster');
const chatRow = (label: string, m: Measured) =>
  console.log(
    `  ${label.padEnd(62)} ${num(m.perSecond, 6)}/s  p50 ${num(m.p50, 6, 1)}  p99 ${num(m.p99, 6, 1)}  err ${m.errors}`,
  );
chatRow('single node, no cluster (test)', chatSingle);
chatRow(`one cluster node, ejabberd-a direct (${oneNodeWs})`, chatOne);
chatRow('two-node cluster through the proxy (scale)', chatBoth);
console.log(
  `  one cluster node / single node: ${(chatOne.perSecond / chatSingle.perSecond).toFixed(2)} (the session table's replication)`,
);
console.log(
  `  two-node cluster / one cluster node: ${(chatBoth.perSecond / chatOne.perSecond).toFixed(2)}; / single node: ${(chatBoth.perSecond / chatSingle.perSecond).toFixed(2)}`,
);

console.log('\nduring the priced phase (background measured in a quiet window before, and taken off)');
targets.forEach((target, i) => {
  const idle0 = idleFrom[i]!;
  const from = pricedFrom[i]!;
  const to = pricedTo[i]!;
  const idleSeconds = (from.at - idle0.at) / 1000;
  // The counters ran from `from` to `to`; only this profile's rounds loaded them.
  const windowSeconds = (to.at - from.at) / 1000;
  const loadSeconds = priced.get(target.label)!.elapsed / 1000;
  const calls = priced.get(target.label)!.count;
  const line = (name: string, idle: number, delta: number) => {
    const background = idle / idleSeconds;
    const net = delta - background * windowSeconds;
    return `  ${target.label.padEnd(6)} ${name.padEnd(42)} ${num(delta / loadSeconds, 7)}/s gross, background ${num(background, 5, 1)}/s, net ${num(net / loadSeconds, 7)}/s = ${num(net / calls, 5, 1)} per call`;
  };
  console.log(
    line(
      'PostgreSQL commits (xact_commit, svc)',
      from.xactCommit - idle0.xactCommit,
      to.xactCommit - from.xactCommit,
    ),
  );
  console.log(
    line(
      'Redis commands (total_commands_processed)',
      from.redisCommands - idle0.redisCommands,
      to.redisCommands - from.redisCommands,
    ),
  );
});

console.log(
  '\nmemory per unit in MiB: VmRSS of its process; PSS of it and its children (PostgreSQL backends, external-auth programs) after the load, and before it',
);
for (const target of targets) {
  const before = new Map(memoryBefore.get(target.profile)!.map((m) => [m.unit, m]));
  let total = 0;
  for (const m of memoryAfter.get(target.profile)!) {
    const was = before.get(m.unit);
    total += m.tree;
    console.log(
      `  ${target.label.padEnd(6)} ${m.unit.padEnd(16)} pid ${String(m.pid).padStart(6)}  RSS ${num(m.own / 1024, 6, 1)}  PSS with ${String(m.children).padStart(2)} children ${num(m.tree / 1024, 6, 1)}  (before ${num((was?.tree ?? Number.NaN) / 1024, 6, 1)})`,
    );
  }
  console.log(`  ${target.label.padEnd(6)} ${'all units, PSS'.padEnd(16)} ${num(total / 1024, 57, 1)}`);
}

await Promise.all(targets.map((target) => target.container.close()));
