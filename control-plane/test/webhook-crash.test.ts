/**
 * A control-plane process killed with SIGKILL while its webhook attempts are in flight loses no
 * event: its claims lapse and another replica (here the test stack's running control plane) sends
 * those attempts again.
 */
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_DELIVERY_OPTIONS } from '../src/modules/webhooks/delivery.js';
import { inTransaction } from '../src/platform/transaction.js';
import { startControlPlaneProcess } from './processes.js';
import { createCustomer, freePort, startTestApp, type TestContext } from './support.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

/** More than one worker claims of an endpoint at once, so that both workers hold some. */
const EVENTS = 2 * DEFAULT_DELIVERY_OPTIONS.heldPerEndpoint + 44;

let ctx: TestContext;
let hook: Receiver;
let killed = false;
beforeAll(async () => {
  ctx = await startTestApp();
  // Held for 3 s until the process is killed (within the 5 s an attempt may take), at once after.
  hook = await startReceiver(() => ({ status: 200, delayMs: killed ? 0 : 3_000 }));
});
afterAll(async () => {
  await hook.close();
  await ctx.close();
});

describe('webhook delivery through a crash', () => {
  it('delivers every event at least once after a control plane is killed mid-attempt', async () => {
    const customer = await createCustomer(ctx.container);
    const endpoint = await ctx.container.webhooks.create(
      { appId: customer.app.id, mode: 'test' },
      { url: hook.url, event_types: ['buzz.created'] },
    );
    const child = await startControlPlaneProcess(await freePort(), await freePort());
    await inTransaction(ctx.container.pool, async (tx) => {
      for (let n = 0; n < EVENTS; n += 1) {
        await ctx.container.outbox.emit(tx, {
          appId: customer.app.id,
          mode: 'test',
          type: 'buzz.created',
          data: { n },
        });
      }
    });
    // Both workers (this process and the stack's) hold a full share of attempts to the endpoint.
    await hook.waitFor(DEFAULT_DELIVERY_OPTIONS.perEndpoint + 1, 15_000);
    child.kill('SIGKILL');
    await once(child, 'exit');
    killed = true;

    const pending = () =>
      ctx.container.pool.oneFirst(sql.unsafe`
        select count(*)::int from webhook_deliveries where endpoint_id = ${endpoint.id} and status <> 'succeeded'`);
    const deadline = Date.now() + DEFAULT_DELIVERY_OPTIONS.claimMs + 30_000;
    while ((await pending()) > 0 && Date.now() < deadline) await sleep(250);
    expect(await pending()).toBe(0);
    const received = new Set(hook.received.map((request) => request.eventId));
    expect(received.size).toBe(EVENTS);
    // The killed process's attempts reached the receiver, and were sent again once their claims lapsed.
    expect(hook.received.length).toBeGreaterThan(EVENTS);
  }, 90_000);
});
