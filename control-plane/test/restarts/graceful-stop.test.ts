import { once } from 'node:events';
import { request } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { loadSettings } from '../../src/config/load.js';
import { type Container, createContainer } from '../../src/container.js';
import { DEFAULT_DELIVERY_OPTIONS } from '../../src/modules/webhooks/delivery.js';
import { inTransaction } from '../../src/platform/transaction.js';
import { startControlPlaneProcess } from '../processes.js';
import { createCustomer, freePort } from '../support.js';
import { type Receiver, startReceiver } from '../webhook-receiver.js';
import { stackServer } from './stack-servers.js';

// The stack's control plane is stopped for this file, so that the process under test is the only
// webhook worker: whatever it leaves undelivered, only the stack's (started again) can send.

/** Three times one endpoint's attempts at once: some in flight at the signal, the rest claimed and waiting. */
const EVENTS = 3 * DEFAULT_DELIVERY_OPTIONS.perEndpoint;
const HELD_MS = 3_000;

let container: Container;
let hook: Receiver;

beforeAll(async () => {
  container = await createContainer(loadSettings(process.env));
  hook = await startReceiver(() => ({ status: 200, delayMs: HELD_MS }));
  await stackServer('down', 'control-plane');
});
afterAll(async () => {
  await stackServer('up', 'control-plane');
  await hook.close();
  await container.close();
});

/** A POST whose body arrives in two halves: `finish` sends the second and resolves with the answer. */
function halfSent(port: number, path: string, token: string, payload: object) {
  const body = Buffer.from(JSON.stringify(payload));
  const sending = request({
    host: '127.0.0.1',
    port,
    path,
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      'content-length': body.length,
    },
  });
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    sending.on('error', reject);
    sending.on('response', (response) => {
      let text = '';
      response.on('data', (chunk) => {
        text += chunk;
      });
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
    });
  });
  sending.write(body.subarray(0, 10));
  return {
    finish: () => {
      sending.end(body.subarray(10));
      return answer;
    },
  };
}

describe('SIGTERM', () => {
  it('stops accepting, finishes the requests in flight, drains the webhook worker and exits 0', async () => {
    const customer = await createCustomer(container);
    await container.webhooks.create(
      { appId: customer.app.id, mode: 'test' },
      { url: hook.url, event_types: ['buzz.created'] },
    );
    const [port, internalPort] = [await freePort(), await freePort()];
    const child = await startControlPlaneProcess(port, internalPort);
    const exited = once(child, 'exit');

    await inTransaction(container.pool, async (tx) => {
      for (let n = 0; n < EVENTS; n += 1)
        await container.outbox.emit(tx, {
          appId: customer.app.id,
          mode: 'test',
          type: 'buzz.created',
          data: { n },
        });
    });
    await hook.waitFor(DEFAULT_DELIVERY_OPTIONS.perEndpoint, 10_000);
    const inFlight = halfSent(port, '/v1/realtime/chat/tokens', customer.token, { user_id: 'draining' });
    await sleep(200);

    const signalled = performance.now();
    child.kill('SIGTERM');
    // New connections are refused at once.
    await expect(
      (async () => {
        for (;;) {
          await fetch(`http://127.0.0.1:${port}/healthz`);
          await sleep(20);
        }
      })(),
    ).rejects.toThrow(/fetch failed/);
    // The request already in flight is finished and answered.
    const answered = await inFlight.finish();
    expect(answered.status, answered.body).toBe(200);
    expect(JSON.parse(answered.body)).toMatchObject({ user: expect.stringContaining('draining') });
    const [code] = await exited;
    expect(code).toBe(0);
    // It waited for the deliveries it had started (each held 2 s), within the grace period.
    const stoppedMs = performance.now() - signalled;
    expect(stoppedMs).toBeGreaterThan(HELD_MS / 2);
    expect(stoppedMs).toBeLessThan(loadSettings(process.env).SVC_SHUTDOWN_GRACE_MS);

    // Its attempts were recorded as they ended, and what it claimed but never started went back at
    // once: nothing is left held by the stopped process.
    const deliveries = () =>
      container.pool.one(
        sql.type(z.object({ succeeded: z.number(), held: z.number() }))`
          select count(*) filter (where d.status = 'succeeded')::int as succeeded,
                 count(*) filter (where q.due_at > now())::int as held
          from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id
          left join webhook_due q on q.delivery_id = d.id
          where e.app_id = ${customer.app.id}`,
      );
    const atExit = await deliveries();
    console.log(
      `SIGTERM: exited 0 after ${stoppedMs.toFixed(0)} ms, ${atExit.succeeded} of ${EVENTS} deliveries done, the rest released`,
    );
    // The attempts under way at the signal (one endpoint's worth, each held 3 s) and no more.
    expect(atExit.succeeded).toBe(DEFAULT_DELIVERY_OPTIONS.perEndpoint);
    expect(atExit.held).toBe(0);
    // The stack's control plane, started again, sends the rest at once (not after a claim lapses),
    // and nothing twice.
    const restarted = performance.now();
    await stackServer('up', 'control-plane');
    while ((await deliveries()).succeeded < EVENTS) {
      expect(performance.now() - restarted).toBeLessThan(DEFAULT_DELIVERY_OPTIONS.claimMs);
      await sleep(100);
    }
    const ids = hook.received.map((received) => received.eventId);
    expect(ids).toHaveLength(EVENTS);
    expect(new Set(ids).size).toBe(EVENTS);
  }, 120_000);
});
