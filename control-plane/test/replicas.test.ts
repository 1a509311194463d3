import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPricedProbeTable, pricedProbe } from './priced-probe.js';
import { callWithKey, createCustomer, startTestApp, type TestContext } from './support.js';

/**
 * Two control planes on the same database and Redis, each with its caches of keys, app settings and
 * prices: a change made through one applies on the other as soon as the bus brings it there.
 */
let one: TestContext;
let other: TestContext;
// A metric no other test file prices, so that its database override stays this file's.
const probe = () => pricedProbe('ai', 'moderate_calls');
beforeAll(async () => {
  one = await startTestApp({ routes: probe });
  other = await startTestApp({ routes: probe });
  await createPricedProbeTable(one.container);
});
afterAll(async () => {
  await one.container.prices.resetToConfigured('ai', 'moderate_calls');
  await one.close();
  await other.close();
});

/**
 * Waits until `to` has heard every invalidation `from` published so far: a marker published after
 * them, on the same Redis connection, arrives after them. Propagation is then proven by the next
 * request alone; how fast it is belongs to `bench/core.ts`, not to a timed test. A marker published
 * before `to` subscribed would never arrive: under load, a replica answers its first requests before
 * its subscription is in place (and drops what they cached once it is).
 */
async function heardAll(from: TestContext, to: TestContext): Promise<void> {
  await to.container.bus.subscribed;
  const marker = randomUUID();
  const heard = new Promise<void>((resolve) =>
    to.container.bus.subscribe('test-barrier', (key) => key === marker && resolve()),
  );
  await from.container.bus.publish('test-barrier', marker);
  await heard;
}

describe('a second replica', () => {
  it('refuses a key as soon as it hears of its revocation on the first', async () => {
    const { token, key } = await createCustomer(one.container);
    // The other replica has the key in its cache.
    expect((await callWithKey(other.app, token, 'GET', '/v1/realtime/balance')).statusCode).toBe(200);
    await one.container.accounts.revokeKey(key.id);
    await heardAll(one, other);
    const refused = await callWithKey(other.app, token, 'GET', '/v1/realtime/balance');
    expect(refused.statusCode).toBe(401);
    expect(refused.json().error.message).toMatch(/revoked/);
  });

  it('applies a new plan, new settings and a new price as soon as it hears of them', async () => {
    const { token, account } = await createCustomer(one.container, { plan: 'free' });
    const limit = async () =>
      (await callWithKey(other.app, token, 'GET', '/v1/realtime/balance')).headers['ratelimit-limit'];
    expect(await limit()).toBe('100');
    await one.container.accounts.setPlan(account.id, 'scale', 5_000);
    await heardAll(one, other);
    expect(await limit()).toBe('5000');

    const mint = () => callWithKey(other.app, token, 'POST', '/v1/realtime/chat/tokens', { user_id: 'u' });
    expect((await mint()).statusCode).toBe(200);
    const patched = await callWithKey(one.app, token, 'PATCH', '/v1/realtime/app', { products: ['live'] });
    expect(patched.statusCode).toBe(200);
    await heardAll(one, other);
    expect((await mint()).statusCode).toBe(403);

    const cost = async () =>
      (await callWithKey(other.app, token, 'POST', '/test/priced')).headers['x-svc-cost-usd'];
    expect(await cost()).toBe('0.000500');
    await one.container.prices.setPrice('ai', 'moderate_calls', 1_250);
    await heardAll(one, other);
    expect(await cost()).toBe('0.001250');
  });
});
