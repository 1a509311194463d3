import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeLiveKit, join } from '../../../e2e/support/livekit.js';
import { api } from '../../../e2e/support/stack.js';
import { loadSettings } from '../../src/config/load.js';
import { type Container, createContainer } from '../../src/container.js';
import { RECONCILE_GRACE_MS } from '../../src/modules/live/service.js';
import { createManualClock } from '../../src/platform/clock.js';
import { liveSessionsOf } from '../ledger.js';
import { createCustomer } from '../support.js';
import { type StackServer, stackServer } from './stack-servers.js';

// Stops each server of the test stack under load and starts it again, against the running control
// plane process (its project runs after every other, one file at a time).

const BASE = loadSettings(process.env).SVC_PUBLIC_URL;
/** The bound: everything answers again within this long of the server's return. */
const RECOVERY_MS = 10_000;
/** No request may take this long while a server is away: it fails fast instead. */
const FAIL_FAST_MS = 8_000;
const LOAD_WORKERS = 4;

interface Answer {
  request: string;
  status: number;
  /** What the request answers while every server is there. */
  upStatus?: number;
  body: string;
  ms: number;
}

const clock = createManualClock(new Date());
let container: Container;
let token: string;

async function call(method: string, path: string, body?: object): Promise<Answer> {
  const started = performance.now();
  const response = await fetch(`${BASE}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(30_000),
  });
  return {
    request: `${method} ${path}`,
    status: response.status,
    body: await response.text(),
    ms: performance.now() - started,
  };
}

/** One request that needs each server, and its answer while the server is there. */
const NEEDS: Record<
  Exclude<StackServer, 'control-plane'>,
  { ask: () => Promise<Answer>; upStatus: number }
> = {
  postgres: { ask: () => call('GET', '/v1/realtime/balance'), upStatus: 200 },
  // The key check reads the key cache in Redis first.
  redis: { ask: () => call('GET', '/v1/realtime/balance'), upStatus: 200 },
  ejabberd: { ask: () => call('POST', '/v1/realtime/chat/rooms', { room: 'restarts' }), upStatus: 200 },
  // Completing an upload asks MinIO for the object: nothing was PUT, so a reachable MinIO says 409.
  minio: {
    ask: async () => {
      const upload = await call('POST', '/v1/storage/uploads', {
        name: 'never-sent.txt',
        content_type: 'text/plain',
        size_bytes: 5,
      });
      if (upload.status !== 201 && upload.status !== 200) return upload;
      return call('POST', `/v1/storage/objects/${JSON.parse(upload.body).object.id}/complete`);
    },
    upStatus: 409,
  },
  // No API request waits on LiveKit's server: tokens are signed here. They keep working throughout.
  livekit: {
    ask: () => call('POST', '/v1/realtime/live/tokens', { room: 'restarts', identity: 'viewer' }),
    upStatus: 200,
  },
};

/** Every server's request, over and over from a few workers, until stopped: the load. */
function startLoad() {
  const answers: Answer[] = [];
  const failures: string[] = [];
  let running = true;
  const workers = Array.from({ length: LOAD_WORKERS }, async () => {
    while (running) {
      for (const need of Object.values(NEEDS)) {
        try {
          answers.push({ ...(await need.ask()), upStatus: need.upStatus });
        } catch (error) {
          failures.push(String(error));
        }
      }
    }
  });
  return {
    answers,
    failures,
    stop: async () => {
      running = false;
      await Promise.all(workers);
    },
  };
}

async function health(): Promise<{ status: string; down: string[] }> {
  return (await fetch(`${BASE}/healthz`)).json() as Promise<{ status: string; down: string[] }>;
}

/** Polls until `done` holds; resolves with how long that took, or fails past `withinMs`. */
async function until(what: string, withinMs: number, done: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (!(await done())) {
    if (performance.now() - started > withinMs) throw new Error(`${what}: not within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return performance.now() - started;
}

/** What any answer may be while a server is away: its usual answer, or the spec's 503 to retry. */
function expectUsualOr503(answer: Answer) {
  if (answer.status === answer.upStatus) return;
  expect({ request: answer.request, status: answer.status }).toEqual({
    request: answer.request,
    status: 503,
  });
  expect(JSON.parse(answer.body)).toEqual({
    error: { type: 'service_unavailable', message: expect.stringMatching(/unavailable|did not answer/) },
  });
}

beforeAll(async () => {
  container = await createContainer(loadSettings(process.env), { clock });
  ({ token } = await createCustomer(container, { balanceMicros: 10_000_000 }));
});
afterAll(async () => {
  await container.close();
  await disposeLiveKit();
});

describe.each(['postgres', 'redis', 'ejabberd', 'minio', 'livekit'] as const)(
  '%s restarted under load',
  (server) => {
    it('fails fast with 503 while away, /healthz names it, and all recovers within 10 s of its return', async () => {
      const need = NEEDS[server];
      expect((await need.ask()).status).toBe(need.upStatus);
      const load = startLoad();
      let recovery = Number.NaN;
      try {
        await stackServer('down', server);
        await until(`/healthz naming ${server}`, 5_000, async () => (await health()).down.includes(server));
        const whileAway = await need.ask();
        if (server === 'livekit') expect(whileAway.status).toBe(200);
        else {
          expect(whileAway.status, whileAway.body).toBe(503);
          expectUsualOr503(whileAway);
        }

        await stackServer('up', server);
        recovery = await until(`${server}'s request answering again`, RECOVERY_MS, async () => {
          return (await need.ask()).status === need.upStatus;
        });
        await until('/healthz all ok', RECOVERY_MS - recovery, async () => (await health()).status === 'ok');
      } finally {
        await load.stop();
      }
      expect(load.failures).toEqual([]);
      const unavailable = load.answers.filter((answer) => answer.status === 503).length;
      const slowest = Math.max(...load.answers.map((answer) => answer.ms));
      console.log(
        `${server}: ${load.answers.length} requests under load, ${unavailable} answered 503, slowest ` +
          `${slowest.toFixed(0)} ms; its request answered again ${recovery.toFixed(0)} ms after its return`,
      );
      // The load met the outage (no API request needs LiveKit's server).
      if (server !== 'livekit') expect(unavailable).toBeGreaterThan(0);
      for (const answer of load.answers) {
        expectUsualOr503(answer);
        expect(answer.ms, answer.request).toBeLessThan(FAIL_FAST_MS);
      }
    });
  },
);

describe('LiveKit restarted with a participant in a room', () => {
  it('has the reconciler close the session whose leave never came, billed once', async () => {
    const customer = await createCustomer(container, { balanceMicros: 10_000_000 });
    const minted = await api<{ url: string; token: string }>(customer, 'POST', '/v1/realtime/live/tokens', {
      room: 'outage',
      identity: 'stayer',
      kind: 'call',
    });
    const participant = await join(minted.body.url, minted.body.token);
    const sessions = () => liveSessionsOf(container, customer.account.id, 'stayer');
    const callsUsage = async () =>
      (await container.billing.usageReport(customer.account.id, 'test', 1)).usage.filter(
        (row) => row.product === 'calls',
      );
    /**
     * One reconciliation at the test's clock. It runs under a lease the running control plane's own
     * reconciler may hold for a while (it asks LiveKit about every open room of every test, and a
     * room LiveKit no longer has takes seconds to answer): so until it ran.
     */
    const reconcile = async () => {
      let result = await container.live.reconcile();
      await until('a reconciliation that ran', 90_000, async () => {
        if (result.rooms > 0) return true;
        result = await container.live.reconcile();
        return false;
      });
      return result;
    };
    await until('the join webhook', 15_000, async () => (await sessions()).length === 1);
    // Seen present a few seconds later: the session is billed up to its last sighting.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    clock.set(new Date());
    await reconcile();
    // The running control plane's own reconciler may sight it too, at its real time, now or later.
    expect((await sessions())[0]!.last_seen_at.getTime()).toBeGreaterThanOrEqual(clock.now().getTime());

    await stackServer('down', 'livekit');
    await participant.leave(); // With LiveKit away: no leave webhook is ever sent.
    await stackServer('up', 'livekit');
    const [open] = await sessions();
    expect(open).toMatchObject({ left_at: null, billed_seconds: null });

    // Past the grace after its last sighting (whichever reconciler made it), a pass finds it missing;
    // missing for the grace since (whichever reconciler noted it), a pass closes it at the sighting.
    clock.set(new Date(open!.last_seen_at.getTime() + RECONCILE_GRACE_MS + 1_000));
    await reconcile();
    const [missing] = await sessions();
    if (missing!.left_at === null) {
      expect(missing!.missing_since).not.toBeNull();
      clock.set(new Date(missing!.missing_since!.getTime() + RECONCILE_GRACE_MS + 1_000));
      expect((await reconcile()).closed).toBeGreaterThanOrEqual(1);
    }
    const [closed] = await sessions();
    expect(closed!.left_at).toEqual(open!.last_seen_at);
    expect(closed!.billed_seconds).toBe(
      Math.ceil((open!.last_seen_at.getTime() - open!.joined_at.getTime()) / 1000),
    );
    expect(closed!.billed_seconds).toBeGreaterThanOrEqual(3);
    const billed = await callsUsage();
    expect(billed).toHaveLength(1);
    // Reconciling again bills nothing more.
    await container.live.reconcile();
    expect(await callsUsage()).toEqual(billed);
    expect(await sessions()).toEqual([closed]);
  });
});
