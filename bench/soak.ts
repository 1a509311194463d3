/**
 * Load held: the running control plane of a stack under a mixed workload for `seconds` (10 minutes by
 * default), over real HTTP on loopback, with the control plane's resident memory (VmRSS) read from
 * /proc each second (printed every 10 s): growth beyond 10 % from the soak's first two minutes to its
 * last two fails, and so does any error. Also printed: each call's rate and p50/p99, the CPU each
 * server of the stack took, and the control plane's heap and open files (its /metrics).
 *
 * The process measured is the stack's own (its pid from the runner's run record), not an app built in
 * the bench: its memory is what an operator's would be. Accounts, apps and keys are made beforehand
 * through the control plane's core services, as the admin CLI makes them (a few accounts, each with a
 * live and a test secret key, topped up far beyond what the run spends).
 *
 * The mix, `concurrency` flows in flight, each flow drawn by weight:
 *   shield tickets with the publishable key, from many loopback addresses (as viewers come);
 *   public-data reads (buzzes, a profile, search, moments, the balance);
 *   app users signing in (a user token, a profile upsert), then buzzing and updating their profile
 *     with that token (priced writes), as a client does for a while;
 *   chat credentials, one in four followed by a real XMPP login over WebSocket (ejabberd asks
 *     the control plane);
 *   LiveKit tokens;
 *   storage: reserve, PUT of 4 KiB to MinIO, complete, a signed read URL, GET from MinIO, removal;
 *   OTPs: a login, the send, the code arriving at the client, its verification;
 *   webhook endpoints registered, pinged, listed and removed.
 * Flows alternate between live keys (priced and charged) and test keys where a webhook should follow
 * (test endpoints may use plain http on loopback, live ones may not): a local receiver checks each
 * delivery's signature, and every event the mix caused must arrive.
 *
 * Before the soak, a floor measured in the same run: GET /healthz with the same connections and
 * concurrency for 10 s. Then 30 s of the mix as a warm-up (JIT, pools, caches), not counted.
 *
 *   npm run stack -- up --profile test && npx tsx bench/soak.ts [seconds=600] [concurrency=8] [--profile dev|test]
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { availableParallelism } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createCore } from '../control-plane/src/core.js';
import { startReceiver } from '../control-plane/test/webhook-receiver.js';
import { available, type ChatCredential, type ChatSession, connect, isOtp } from '../e2e/support/xmpp.js';
import { stackPaths } from '../infra/src/paths.js';
import { parseProfile } from '../infra/src/profile.js';
import {
  isRecordAlive,
  procKiB,
  procStatFields,
  readRunRecord,
  runningRecords,
} from '../infra/src/run-records.js';
import { percentiles, useStackSettings } from './support.js';

const { values, positionals } = parseArgs({
  options: { profile: { type: 'string', default: 'test' } },
  allowPositionals: true,
});
const profile = parseProfile(values.profile);
const seconds = Number(positionals[0] ?? 600);
const concurrency = Number(positionals[1] ?? 8);
const FLOOR_SECONDS = 10;
const WARM_UP_SECONDS = 30;
/** The series printed: one reading in ten (they are taken each second). */
const SAMPLE_SECONDS = 10;
const RSS_GROWTH_GOAL = 0.1;
const ACCOUNTS = 4;
/** Bounded: a request, a login or an awaited stanza that takes longer is an error, not a hang. */
const TIMEOUT_MS = 30_000;
/** After the soak, how long every event the mix caused may still take to reach the receiver. */
const DELIVERY_GRACE_MS = 30_000;
const UPLOAD_BYTES = 4_096;
/** Shield tickets come from this many loopback addresses: one address may ask 120 a minute. */
const VIEWER_ADDRESSES = 128;
const ERRORS_SHOWN = 5;
/**
 * One app-user call in this many is a sign-in (a new user, a new token), and each account keeps its
 * latest signed-in users: a client calls many times with one token, as the verified-token cache
 * expects (a new token every call or two would fill it at the mix's pace, up to its bound).
 */
const APP_USER_CALLS = 8;
const APP_USERS_SIGNED_IN = 50;

useStackSettings(profile);
const settings = loadSettings(process.env);
const baseUrl = settings.SVC_PUBLIC_URL;
const metricsUrl = `http://${settings.SVC_INTERNAL_HOST}:${settings.SVC_INTERNAL_PORT}/metrics`;
const controlPlane = readRunRecord(stackPaths(profile).runDir, 'control-plane');
if (!controlPlane || !isRecordAlive(controlPlane))
  throw new Error(
    `the ${profile} stack's control plane is not running: npm run stack -- up --profile ${profile}`,
  );
/** Names made by this run: users, usernames, rooms. */
const run = randomBytes(3).toString('hex');

// ----- HTTP over keep-alive connections, as an integrator's server calls -------------------------

/** One pool for every call: the floor and the mix share its connection settings. */
const agent = new Agent({ keepAlive: true, timeout: 4_000 });

interface Answer {
  status: number;
  body: Buffer;
}

/** One request, its answer read whole; `from` is the local address to call from (all of 127/8 is loopback). */
function send(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer; from?: string } = {},
): Promise<Answer> {
  const body = options.body ?? '';
  return new Promise((resolve, reject) => {
    const sent = request(
      url,
      {
        method: options.method ?? 'GET',
        headers: { ...options.headers, 'content-length': String(Buffer.byteLength(body)) },
        agent,
        ...(options.from ? { localAddress: options.from } : {}),
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks) }));
        response.on('error', reject);
      },
    );
    sent.setTimeout(TIMEOUT_MS, () => sent.destroy(new Error(`no answer in ${TIMEOUT_MS / 1000} s`)));
    sent.on('error', reject);
    sent.end(body);
  });
}

// ----- the book: latencies and errors per step -----------------------------------------------------

/** Control-plane API calls make the totals; the rest (MinIO, XMPP, deliveries) is shown beside them. */
type Kind = 'api' | 'around';
interface Tally {
  kind: Kind;
  latencies: number[];
  errors: number;
}
interface Book {
  tallies: Map<string, Tally>;
  errorSamples: string[];
}
const newBook = (): Book => ({ tallies: new Map(), errorSamples: [] });
let book = newBook();

function tally(label: string, kind: Kind): Tally {
  let found = book.tallies.get(label);
  if (!found) {
    found = { kind, latencies: [], errors: 0 };
    book.tallies.set(label, found);
  }
  return found;
}

function recordError(label: string, kind: Kind, detail: string) {
  tally(label, kind).errors += 1;
  if (book.errorSamples.length < ERRORS_SHOWN) book.errorSamples.push(`${label}: ${detail.slice(0, 400)}`);
}

/** A step that failed, already in the book: the flow stops there. */
class StepFailed extends Error {}

/** Times one step of a flow; a failure is booked under its label and ends the flow. */
async function step<T>(label: string, kind: Kind, task: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    const result = await task();
    tally(label, kind).latencies.push(performance.now() - started);
    return result;
  } catch (error) {
    if (!(error instanceof StepFailed)) recordError(label, kind, String(error));
    throw new StepFailed(label);
  }
}

/** Fails within the bound: a login or a stanza that never comes. */
function bounded<T>(task: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing in ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS);
  });
  return Promise.race([task, timeout]).finally(() => clearTimeout(timer));
}

type Headers = Record<string, string>;
type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/**
 * A call to the control plane, booked as "METHOD template" (`{name}` filled from `params`); any
 * status but `status` is an error the workload did not intend.
 */
function api<T>(
  headers: Headers,
  method: Method,
  template: string,
  options: { params?: Record<string, string>; body?: object; status?: number; from?: string } = {},
): Promise<T> {
  const path = template.replace(/\{(\w+)\}/g, (_, name: string) =>
    encodeURIComponent(options.params![name]!),
  );
  const label = `${method} ${template}`;
  return step(label, 'api', async () => {
    const answer = await send(`${baseUrl}${path}`, {
      method,
      headers: { ...headers, ...(options.body ? { 'content-type': 'application/json' } : {}) },
      ...(options.body ? { body: JSON.stringify(options.body) } : {}),
      ...(options.from ? { from: options.from } : {}),
    });
    if (answer.status !== (options.status ?? 200)) {
      recordError(label, 'api', `${answer.status} ${answer.body.toString('utf8')}`);
      throw new StepFailed(label);
    }
    return JSON.parse(answer.body.toString('utf8')) as T;
  });
}

// ----- webhook deliveries: a receiver that checks each one and counts the events -------------------

interface Delivered {
  id: string;
  type: string;
  created_at: string;
  app_id: string;
  data: { id?: string; endpoint_id?: string; buzz?: { id: string } };
}

/** The event an answer or a delivery names, e.g. `otp.delivered:msg_…`. */
const eventKey = (type: string, id: string) => `${type}:${id}`;
const expectedEvents = new Set<string>();
const deliveredEvents = new Map<string, number>();
const eventWaiters = new Map<string, () => void>();
/** Signing secrets: the permanent endpoint's by app, a registered-and-removed one's by endpoint. */
const secretOfApp = new Map<string, string>();
const secretOfEndpoint = new Map<string, string>();
const DELIVERY = 'webhook delivered (event → receiver)';

const receiver = await startReceiver((received) => {
  try {
    const event = JSON.parse(received.body) as Delivered;
    const id = event.type === 'ping' ? event.data.endpoint_id : (event.data.buzz?.id ?? event.data.id);
    const secret = event.type === 'ping' ? secretOfEndpoint.get(id ?? '') : secretOfApp.get(event.app_id);
    const expected = `sha256=${createHmac('sha256', secret ?? '')
      .update(received.body)
      .digest('hex')}`;
    if (!secret || received.headers['x-svc-signature'] !== expected)
      recordError(DELIVERY, 'around', `bad signature on ${event.type} ${event.id}`);
    else tally(DELIVERY, 'around').latencies.push(Date.now() - Date.parse(event.created_at));
    const key = eventKey(event.type, id ?? event.id);
    deliveredEvents.set(key, (deliveredEvents.get(key) ?? 0) + 1);
    eventWaiters.get(key)?.();
  } catch (error) {
    recordError(DELIVERY, 'around', `unreadable delivery: ${String(error)}`);
  }
  return { status: 200 };
});
// Its record of every request is not needed here: cleared as it goes, so the bench's memory stays flat.
setInterval(() => receiver.received.splice(0), 10_000).unref();

/** Resolves once the event has reached the receiver (at once if it already has), within the bound. */
const delivered = (key: string) =>
  deliveredEvents.has(key) ||
  bounded(new Promise<void>((resolve) => eventWaiters.set(key, resolve)), key).finally(() =>
    eventWaiters.delete(key),
  );

// ----- accounts: a live and a test key each, as the admin CLI makes them ---------------------------

interface Account {
  appId: string;
  live: Headers;
  test: Headers;
  publishableKey: string;
  /** The test-mode endpoint that gets the events the mix causes. */
  endpointId: string;
  /** Usernames of its live profiles so far (the latest few), for the reads. */
  usernames: string[];
  /** Its app users signed in now (the latest few), each with the token their client uses. */
  appUsers: AppUser[];
}

interface AppUser {
  headers: Headers;
  mode: 'live' | 'test';
  username: string;
}

async function createAccounts(): Promise<Account[]> {
  const core = await createCore(settings);
  try {
    return await Promise.all(
      Array.from({ length: ACCOUNTS }, async (_, i) => {
        const account = await core.accounts.createAccount({
          name: `soak bench ${run}-${i}`,
          plan: 'scale',
          dailyRequestCap: 100_000_000,
        });
        const app = await core.accounts.createApp({ accountId: account.id, name: 'soak bench' });
        const key = async (mode: 'live' | 'test') => {
          const { token } = await core.accounts.createKey({ appId: app.id, kind: 'secret', mode });
          return { authorization: `Bearer ${token}` };
        };
        const [live, test] = [await key('live'), await key('test')];
        // A million dollars: never the balance's refusal, whatever the run's length.
        await core.billing.topUp({ accountId: account.id, amountMicros: 1e12, reference: 'soak bench' });
        const setup = await api<{ publishable_key: string }>(live, 'POST', '/v1/realtime/app');
        const endpoint = await api<{ id: string; secret: string }>(test, 'POST', '/v1/webhooks', {
          body: { url: receiver.url, event_types: ['otp.delivered', 'buzz.created'], description: 'soak' },
          status: 201,
        });
        secretOfApp.set(app.id, endpoint.secret);
        return {
          appId: app.id,
          live,
          test,
          publishableKey: setup.publishable_key,
          endpointId: endpoint.id,
          usernames: [],
          appUsers: [],
        };
      }),
    );
  } finally {
    await core.close();
  }
}

// ----- the flows of the mix --------------------------------------------------------------------

const LOGIN = 'XMPP login over WebSocket, until available';
/** Sessions closing in the background: ejabberd answers a stream close only after 100 ms. */
const closing = new Set<Promise<void>>();
function close(session: ChatSession) {
  const stopped = session.stop().finally(() => closing.delete(stopped));
  closing.add(stopped);
}

/**
 * A login as a client makes it: over once the server has echoed the initial presence. A session
 * that comes up only after the bound is closed as soon as it does.
 */
async function login(credential: ChatCredential): Promise<ChatSession> {
  let abandoned = false;
  const attempt = (async () => {
    const session = await connect(credential, 'soak');
    try {
      await available(session, TIMEOUT_MS);
      if (abandoned) throw new Error('available after the bound');
    } catch (error) {
      close(session);
      throw error;
    }
    return session;
  })();
  return step(LOGIN, 'around', () =>
    bounded(attempt, 'login').catch((error: unknown) => {
      abandoned = true;
      throw error;
    }),
  );
}

/** Every other turn of a flow on a test key, where a webhook should follow. */
const modeOf = (turn: number): 'live' | 'test' => (turn % 2 === 0 ? 'live' : 'test');
const userOf = (n: number) => `soak-${run}-${n}`;

const reads: ((account: Account, turn: number) => Promise<unknown>)[] = [
  (account) => api(account.live, 'GET', '/v1/buzzes?limit=20'),
  (account, turn) => {
    const username = account.usernames[turn % Math.max(1, account.usernames.length)];
    return username
      ? api(account.live, 'GET', '/v1/profiles/{username}', { params: { username } })
      : api(account.live, 'GET', '/v1/buzzes?limit=20');
  },
  (account) => api(account.live, 'GET', '/v1/search?q=soak&limit=20'),
  (account) => api(account.live, 'GET', '/v1/moments?limit=20'),
  (account) => api(account.live, 'GET', '/v1/realtime/balance'),
];

interface Flow {
  name: string;
  weight: number;
  /** `n` numbers the run's flows (unique names), `turn` this flow's runs (its cadence). */
  run: (account: Account, n: number, turn: number) => Promise<unknown>;
  turns: number;
}

const FLOWS: Flow[] = [
  {
    name: 'shield ticket',
    weight: 20,
    turns: 0,
    run: (account, n) =>
      api(
        { 'x-publishable-key': account.publishableKey, 'user-agent': 'Mozilla/5.0 Chrome/126.0' },
        'POST',
        '/v1/realtime/shield/ticket',
        {
          body: { subject: `viewer-${n}`, scope: `stream-${n % 50}` },
          from: `127.0.1.${1 + (n % VIEWER_ADDRESSES)}`,
        },
      ),
  },
  {
    name: 'public-data read',
    weight: 20,
    turns: 0,
    run: (account, _, turn) => reads[turn % reads.length]!(account, turn),
  },
  {
    name: 'app user: sign in (token, profile) or act (buzz, profile update)',
    weight: 24,
    turns: 0,
    run: async (account, n, turn) => {
      const signedIn = account.appUsers[Math.floor(Math.random() * account.appUsers.length)];
      if (turn % APP_USER_CALLS === 0 || !signedIn) {
        // A user signs in: a token for their client, their profile made.
        const mode = modeOf(Math.floor(turn / APP_USER_CALLS));
        const { token } = await api<{ token: string }>(account[mode], 'POST', '/v1/users/{user_id}/tokens', {
          params: { user_id: userOf(n) },
          body: {},
        });
        const user = { headers: { authorization: `Bearer ${token}` }, mode, username: `soak_${run}_${n}` };
        await api(user.headers, 'PUT', '/v1/me/profile', {
          body: { username: user.username, full_name: 'Soak' },
        });
        account.appUsers = [user, ...account.appUsers.slice(0, APP_USERS_SIGNED_IN - 1)];
        if (mode === 'live') account.usernames = [user.username, ...account.usernames.slice(0, 19)];
        return;
      }
      if (turn % 4 === 1) {
        await api(signedIn.headers, 'PUT', '/v1/me/profile', {
          body: { username: signedIn.username, full_name: `Soak ${n}` },
        });
        return;
      }
      const buzz = await api<{ id: string }>(signedIn.headers, 'POST', '/v1/me/buzzes', {
        body: { text: `soak ${run} buzz ${n} #soak` },
      });
      if (signedIn.mode === 'test') expectedEvents.add(eventKey('buzz.created', buzz.id));
    },
  },
  {
    name: 'chat credential (1 in 4 logs in)',
    weight: 12,
    turns: 0,
    run: async (account, n, turn) => {
      const credential = await api<ChatCredential>(account.live, 'POST', '/v1/realtime/chat/tokens', {
        body: { user_id: userOf(n) },
      });
      if (turn % 4 === 0) close(await login(credential));
    },
  },
  {
    name: 'LiveKit token',
    weight: 10,
    turns: 0,
    run: (account, n) =>
      api(account.live, 'POST', '/v1/realtime/live/tokens', {
        body: { room: `soak-${n % 20}`, identity: `viewer-${n}` },
      }),
  },
  {
    name: 'storage: reserve, PUT, complete, read URL, GET, remove',
    weight: 8,
    turns: 0,
    run: async (account, n) => {
      const bytes = Buffer.alloc(UPLOAD_BYTES, n % 256);
      const reserved = await api<{ object: { id: string }; upload_url: string; upload_headers: Headers }>(
        account.live,
        'POST',
        '/v1/storage/uploads',
        {
          body: { name: `soak-${n}.txt`, content_type: 'text/plain', size_bytes: bytes.length },
          status: 201,
        },
      );
      const params = { id: reserved.object.id };
      await step('MinIO PUT to the presigned upload URL', 'around', async () => {
        const put = await send(reserved.upload_url, {
          method: 'PUT',
          headers: reserved.upload_headers,
          body: bytes,
        });
        if (put.status !== 200) throw new Error(`${put.status} ${put.body.toString('utf8')}`);
      });
      await api(account.live, 'POST', '/v1/storage/objects/{id}/complete', { params });
      const read = await api<{ url: string }>(account.live, 'GET', '/v1/storage/objects/{id}', { params });
      await step('MinIO GET of the signed read URL', 'around', async () => {
        const got = await send(read.url);
        if (got.status !== 200 || !got.body.equals(bytes))
          throw new Error(`${got.status}, ${got.body.length} bytes back of ${bytes.length}`);
      });
      await api(account.live, 'DELETE', '/v1/storage/objects/{id}', { params });
    },
  },
  {
    name: 'OTP: login, send, arrival, verify',
    weight: 6,
    turns: 0,
    run: async (account, n, turn) => {
      const mode = modeOf(turn);
      const user = userOf(n);
      const credential = await api<ChatCredential>(account[mode], 'POST', '/v1/realtime/chat/tokens', {
        body: { user_id: user },
      });
      const session = await login(credential);
      try {
        const arriving = session.next(isOtp, TIMEOUT_MS);
        // Awaited below unless the send fails first: then its timeout is nobody's error.
        arriving.catch(() => {});
        const sent = await api<{ id: string; delivered: boolean }>(account[mode], 'POST', '/v1/otp/send', {
          body: { to: user },
        });
        const code = await step('OTP at the client (send → stanza)', 'around', async () => {
          if (!sent.delivered) throw new Error(`not delivered to an online user: ${JSON.stringify(sent)}`);
          const body = (await arriving).getChildText('body') ?? '';
          return /\b(\d{6})\b/.exec(body)?.[1] ?? '';
        });
        const verified = await api<{ verified: boolean }>(account[mode], 'POST', '/v1/otp/verify', {
          body: { to: user, code },
        });
        if (!verified.verified)
          recordError('POST /v1/otp/verify', 'api', `the code of ${user} did not verify`);
        if (mode === 'test') expectedEvents.add(eventKey('otp.delivered', sent.id));
      } finally {
        close(session);
      }
    },
  },
  {
    name: 'webhook endpoint: register, ping, deliveries, remove',
    weight: 2,
    turns: 0,
    run: async (account) => {
      const endpoint = await api<{ id: string; secret: string }>(account.test, 'POST', '/v1/webhooks', {
        // An event the mix never causes: this endpoint gets its ping only.
        body: { url: receiver.url, event_types: ['follow.created'], description: 'soak, short-lived' },
        status: 201,
      });
      secretOfEndpoint.set(endpoint.id, endpoint.secret);
      const params = { id: endpoint.id };
      try {
        await api(account.test, 'POST', '/v1/webhooks/{id}/test', { params, status: 201 });
        expectedEvents.add(eventKey('ping', endpoint.id));
        await step('webhook ping at the receiver (test → delivery)', 'around', async () =>
          delivered(eventKey('ping', endpoint.id)),
        );
        await api(account.test, 'GET', '/v1/webhooks/{id}/deliveries', { params });
      } finally {
        await api(account.test, 'DELETE', '/v1/webhooks/{id}', { params });
      }
    },
  },
];

const totalWeight = FLOWS.reduce((sum, flow) => sum + flow.weight, 0);
function drawFlow(): Flow {
  let left = Math.random() * totalWeight;
  for (const flow of FLOWS) {
    left -= flow.weight;
    if (left < 0) return flow;
  }
  return FLOWS[0]!;
}

/** `concurrency` loops of `task` until `until()`; each iteration numbered. */
async function loops(task: (n: number) => Promise<unknown>, until: () => boolean) {
  let next = 0;
  const loop = async () => {
    while (!until()) {
      const n = next++;
      try {
        await task(n);
      } catch (error) {
        // A failed step is already booked; anything else is the bench's own fault, booked too.
        if (!(error instanceof StepFailed)) recordError('bench', 'around', String(error));
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
}

// ----- the control plane's process: memory, CPU, handles ------------------------------------------

interface Sample {
  at: number;
  rssKiB: number;
  heapUsedBytes: number;
  openFds: number;
}

/** NaN once the process is gone (the run then fails: it was restarted). */
function rssKiB(): number {
  return procKiB(controlPlane!.pid, 'status', 'VmRSS') ?? Number.NaN;
}

/** The control plane's own gauges from its Prometheus metrics (internal listener). */
async function gauges(): Promise<Record<string, number>> {
  const text = await send(metricsUrl).then(
    (answer) => answer.body.toString('utf8'),
    () => '',
  );
  const values: Record<string, number> = {};
  for (const match of text.matchAll(/^(svc_\w+) ([\d.e+-]+)$/gm)) values[match[1]!] = Number(match[2]);
  return values;
}

async function sample(at: number): Promise<Sample> {
  const values = await gauges();
  return {
    at,
    rssKiB: rssKiB(),
    heapUsedBytes: values.svc_nodejs_heap_size_used_bytes ?? Number.NaN,
    openFds: values.svc_process_open_fds ?? Number.NaN,
  };
}

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** CPU time of the whole machine in ticks: busy, and in all (busy and idle, every core). */
function machineTicks(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = fields.reduce((sum, value) => sum + value, 0);
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { busy: total - idle, total };
}

/** Indexes into procStatFields: parent (field 4), utime, stime, cutime, cstime (fields 14-17). */
const [PARENT, UTIME, STIME, CUTIME, CSTIME] = [1, 11, 12, 13, 14];

/**
 * CPU ticks so far of each server of the stack: its process and those below it (PostgreSQL's
 * backends, ejabberd's external-auth programs), plus the children it has reaped.
 */
function serverTicks(): Map<string, number> {
  const processes = new Map<number, number[]>();
  for (const entry of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    const fields = procStatFields(entry);
    if (fields) processes.set(Number(entry), fields.map(Number));
  }
  const serverOf = new Map(
    runningRecords(stackPaths(profile).runDir).map((record) => [record.pid, record.server]),
  );
  const ticks = new Map<string, number>();
  for (const [pid, fields] of processes) {
    let ancestor: number | undefined = pid;
    while (ancestor !== undefined && ancestor > 1 && !serverOf.has(ancestor))
      ancestor = processes.get(ancestor)?.[PARENT];
    const server = ancestor === undefined ? undefined : serverOf.get(ancestor);
    if (!server) continue;
    const reaped = pid === ancestor ? fields[CUTIME]! + fields[CSTIME]! : 0;
    ticks.set(server, (ticks.get(server) ?? 0) + fields[UTIME]! + fields[STIME]! + reaped);
  }
  return ticks;
}

// ----- the run ----------------------------------------------------------------------------------

const mib = (kib: number) => (kib / 1024).toFixed(1);
const ms = (value: number) => `${value.toFixed(1).padStart(7)} ms`;
const line = (label: string, count: number, errors: number, latencies: number[], elapsedS: number) => {
  const { p50, p99 } = percentiles(latencies);
  return `  ${label.padEnd(58)} ${String(count).padStart(7)} ${(count / elapsedS).toFixed(1).padStart(8)}/s  p50 ${ms(p50)}  p99 ${ms(p99)}  errors ${errors}`;
};

console.log(
  `soak on the ${profile} stack (${baseUrl}), control plane pid ${controlPlane.pid}: ${seconds} s of the mix, ${concurrency} flows in flight, node ${process.version}`,
);
console.log(`mix, by weight: ${FLOWS.map((flow) => `${flow.name} ${flow.weight}`).join('; ')}`);
const accounts = await createAccounts();

// The floor: the least a call costs over these connections, at the same concurrency.
const FLOOR = 'GET /healthz (floor)';
const floorEnd = performance.now() + FLOOR_SECONDS * 1000;
await loops(
  () =>
    step(FLOOR, 'around', async () => {
      const answer = await send(`${baseUrl}/healthz`);
      if (answer.status !== 200) throw new Error(`${answer.status}`);
    }),
  () => performance.now() > floorEnd,
);
const floorBook = book;
book = newBook();

let stopping = false;
const flowsRunning = loops(
  async (n) => {
    const flow = drawFlow();
    return flow.run(accounts[Math.floor(Math.random() * ACCOUNTS)]!, n, flow.turns++);
  },
  () => stopping,
);
await sleep(WARM_UP_SECONDS * 1000);
const warmUp = book;
book = newBook();

const started = performance.now();
const startMachine = machineTicks();
const startServers = serverTicks();
const startBenchCpu = process.cpuUsage();
const secondsIn = () => (performance.now() - started) / 1000;
/** Read each second, printed every 10 s: the goal is judged on windows of them, not on one reading. */
const samples: Sample[] = [await sample(0)];
while (secondsIn() < seconds) {
  await sleep(Math.max(0, Math.min(1_000 * samples.length, seconds * 1000) - secondsIn() * 1000));
  samples.push(await sample(secondsIn()));
  if ((samples.length - 1) % 60 === 0 && secondsIn() < seconds - 1) {
    const steps = [...book.tallies.values()].reduce((sum, t) => sum + t.latencies.length + t.errors, 0);
    const errors = [...book.tallies.values()].reduce((sum, t) => sum + t.errors, 0);
    console.log(
      `  ${secondsIn().toFixed(0)} s: ${steps} steps, ${errors} errors, RSS ${mib(samples.at(-1)!.rssKiB)} MiB`,
    );
  }
}
const elapsedS = secondsIn();
const endMachine = machineTicks();
const endServers = serverTicks();
const benchCpu = process.cpuUsage(startBenchCpu);
stopping = true;
await flowsRunning;
const stillAlive = isRecordAlive(controlPlane);

// Every event the mix caused reaches the receiver, within a grace period.
const waitedFrom = performance.now();
const missing = () => [...expectedEvents].filter((key) => !deliveredEvents.has(key));
while (missing().length > 0 && performance.now() - waitedFrom < DELIVERY_GRACE_MS) await sleep(250);
for (const key of missing()) recordError(DELIVERY, 'around', `${key} never arrived`);
const duplicates = [...deliveredEvents.values()].reduce((sum, count) => sum + count - 1, 0);

const soak = book;
book = newBook();

// Cleaning up: the sessions, the endpoints, the receiver, the connections (a failure is booked apart).
await Promise.all(closing);
for (const account of accounts)
  await api(account.test, 'DELETE', '/v1/webhooks/{id}', { params: { id: account.endpointId } }).catch(
    () => {},
  );
await receiver.close();
agent.destroy();

// ----- figures ---------------------------------------------------------------------------------

const floorTally = floorBook.tallies.get(FLOOR)!;
const floor = percentiles(floorTally.latencies);
console.log(
  `\nfloor, GET /healthz for ${FLOOR_SECONDS} s, ${concurrency} in flight: ${(floorTally.latencies.length / FLOOR_SECONDS).toFixed(0)}/s, p50 ${floor.p50.toFixed(2)} ms, p99 ${floor.p99.toFixed(2)} ms, errors ${floorTally.errors}`,
);
const entries = [...soak.tallies.entries()].sort(([a], [b]) => a.localeCompare(b));
const apiEntries = entries.filter(([, t]) => t.kind === 'api');
console.log(
  `\ncontrol-plane API calls over ${elapsedS.toFixed(0)} s (after ${WARM_UP_SECONDS} s of warm-up):`,
);
console.log(`  ${'call'.padEnd(58)} ${'calls'.padStart(7)} ${'rate'.padStart(10)}`);
for (const [label, t] of apiEntries)
  console.log(line(label, t.latencies.length, t.errors, t.latencies, elapsedS));
const allApi = apiEntries.flatMap(([, t]) => t.latencies);
const apiErrors = apiEntries.reduce((sum, [, t]) => sum + t.errors, 0);
console.log(line('all API calls', allApi.length, apiErrors, allApi, elapsedS));
console.log('\naround them (other servers, clients, the webhook worker):');
for (const [label, t] of entries.filter(([, t]) => t.kind === 'around'))
  console.log(line(label, t.latencies.length, t.errors, t.latencies, elapsedS));
console.log(
  `  webhook events expected ${expectedEvents.size}, delivered ${expectedEvents.size - missing().length}, duplicate deliveries ${duplicates}`,
);

const mixP99 = percentiles(allApi).p99;
console.log(`\nratio of p99, mix's API calls / floor: ${(mixP99 / floor.p99).toFixed(1)}`);
const first = samples[0]!;
const last = samples.at(-1)!;
const percentOfCore = (ticks: number) => ((ticks / TICKS_PER_SECOND / elapsedS) * 100).toFixed(0);
const serverShares = [...endServers]
  .map(([server, ticks]) => [server, ticks - (startServers.get(server) ?? ticks)] as const)
  .sort(([, a], [, b]) => b - a);
const benchTicks = ((benchCpu.user + benchCpu.system) / 1e6) * TICKS_PER_SECOND;
const machineBusy = endMachine.busy - startMachine.busy;
const elsewhere = machineBusy - benchTicks - serverShares.reduce((sum, [, ticks]) => sum + ticks, 0);
console.log(
  `CPU over the soak, % of one core: ${serverShares.map(([server, ticks]) => `${server} ${percentOfCore(ticks)}`).join(', ')}, ` +
    `the bench ${percentOfCore(benchTicks)}, other processes ${percentOfCore(elsewhere)}; ` +
    `the machine ${((machineBusy / (endMachine.total - startMachine.total)) * 100).toFixed(0)} % busy (${availableParallelism()} cores)`,
);

const series = samples.filter((_, i) => i % SAMPLE_SECONDS === 0 || i === samples.length - 1);
console.log(`\ncontrol plane every ${SAMPLE_SECONDS} s: RSS MiB / heap used MiB / open fds`);
for (let i = 0; i < series.length; i += 6)
  console.log(
    `  ${series
      .slice(i, i + 6)
      .map(
        (s) =>
          `${s.at.toFixed(0).padStart(4)} s ${mib(s.rssKiB)}/${(s.heapUsedBytes / 2 ** 20).toFixed(0)}/${s.openFds}`,
      )
      .join('  ')}`,
  );
/**
 * V8 lets garbage pile up to a few times the live heap before a full collection, then the heap falls
 * back (a saw-tooth of 1-2 minutes here), and one reading lands anywhere on it. So the goal compares
 * windows of two minutes (a third of a shorter soak), each holding a whole tooth: the highest RSS of
 * the first and of the last. The lowest heap used (about the live heap after a full collection) is
 * shown beside it.
 */
const judged = Math.min(120, elapsedS / 3);
const inWindow = (from: number) => samples.filter((s) => s.at >= from && s.at <= from + judged);
const peakRss = (from: number) => Math.max(...inWindow(from).map((s) => s.rssKiB));
const heapFloor = (from: number) => Math.min(...inWindow(from).map((s) => s.heapUsedBytes)) / 2 ** 20;
const [rssStart, rssEnd] = [peakRss(0), peakRss(elapsedS - judged)];
const growth = (rssEnd - rssStart) / rssStart;
const rssHeld = growth <= RSS_GROWTH_GOAL && stillAlive;
console.log(
  `RSS readings: at the start ${mib(first.rssKiB)} MiB, at the end ${mib(last.rssKiB)} MiB; ` +
    `heap used at its lowest: ${heapFloor(0).toFixed(0)} MiB in the first ${judged.toFixed(0)} s, ` +
    `${heapFloor(elapsedS - judged).toFixed(0)} MiB in the last`,
);
console.log(
  `RSS peak of the first ${judged.toFixed(0)} s ${mib(rssStart)} MiB, of the last ${judged.toFixed(0)} s ${mib(rssEnd)} MiB, ` +
    `growth ${(growth * 100).toFixed(1)} % (≤ ${RSS_GROWTH_GOAL * 100} % wanted): ${rssHeld ? 'PASS' : 'FAIL'}` +
    `${stillAlive ? '' : ' (the control plane was restarted during the soak)'}`,
);
const errors = entries.reduce((sum, [, t]) => sum + t.errors, 0);
console.log(`errors ${errors} (0 wanted): ${errors === 0 ? 'PASS' : 'FAIL'}`);
for (const sample of soak.errorSamples) console.log(`  ${sample}`);
for (const [phase, earlier] of [
  ['floor', floorBook],
  ['warm-up', warmUp],
  ['cleanup', book],
] as const) {
  const count = [...earlier.tallies.values()].reduce((sum, t) => sum + t.errors, 0);
  if (count === 0) continue;
  console.log(`${phase} errors (not counted above): ${count}`);
  for (const sample of earlier.errorSamples) console.log(`  ${sample}`);
}
if (!rssHeld || errors > 0) process.exitCode = 1;
