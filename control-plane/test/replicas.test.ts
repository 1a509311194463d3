import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPricedProbeTable, pricedProbe } from './priced-probe.js';
import { callWithKey, createCustomer, startTestApp, type TestContext } from './support.js';

/**
 * Two control planes on the same database and Redis, each with its caches of keys, app settings and
 * prices: a change made through one reaches the other within a second.
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

/** Calls `check` until it holds, and answers how long that took (failing after `limitMs`). */
async function within(limitMs: number, check: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > limitMs) throw new Error(`not within ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return performance.now() - started;
}

describe('a second replica', () => {
  it('refuses a key within a second of its revocation on the first', async () => {
    const { token, key } = await createCustomer(one.container);
    // The other replica has the key in its cache.
    expect((await callWithKey(other.app, token, 'GET', '/v1/realtime/balance')).statusCode).toBe(200);
    await one.container.accounts.revokeKey(key.id);
    const took = await within(1_000, async () => {
      const response = await callWithKey(other.app, token, 'GET', '/v1/realtime/balance');
      return response.statusCode === 401 && /revoked/.test(response.json().error.message);
    });
    expect(took).toBeLessThan(1_000);
  });

  it('applies a new plan, new settings and a new price within a second', async () => {
    const { token, account } = await createCustomer(one.container, { plan: 'free' });
    const limit = async () =>
      (await callWithKey(other.app, token, 'GET', '/v1/realtime/balance')).headers['ratelimit-limit'];
    expect(await limit()).toBe('100');
    await one.container.accounts.setPlan(account.id, 'scale', 5_000);
    await within(1_000, async () => (await limit()) === '5000');

    const mint = () => callWithKey(other.app, token, 'POST', '/v1/realtime/chat/tokens', { user_id: 'u' });
    expect((await mint()).statusCode).toBe(200);
    const patched = await callWithKey(one.app, token, 'PATCH', '/v1/realtime/app', { products: ['live'] });
    expect(patched.statusCode).toBe(200);
    await within(1_000, async () => (await mint()).statusCode === 403);

    const cost = async () =>
      (await callWithKey(other.app, token, 'POST', '/test/priced')).headers['x-svc-cost-usd'];
    expect(await cost()).toBe('0.000500');
    await one.container.prices.setPrice('ai', 'moderate_calls', 1_250);
    await within(1_000, async () => (await cost()) === '0.001250');
  });
});
