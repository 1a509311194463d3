import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createPricedProbeTable, pricedProbe } from './priced-probe.js';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

/** writes.calls at its shipped price, with no free allowance. */
const WRITE_PRICE = 500;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp({ routes: () => pricedProbe() });
  await createPricedProbeTable(ctx.container);
});
afterAll(async () => {
  await ctx.close();
});

const call = (token: string, query = '') =>
  ctx.app.inject({
    method: 'POST',
    url: `/test/priced${query}`,
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: uniqueAddress(),
  });

const writesOf = (appId: string) =>
  ctx.container.pool.oneFirst(
    sql.type(
      z.object({ count: z.number() }),
    )`select count(*)::int as count from test_priced_writes where app_id = ${appId}`,
  );

const ledgerSum = (accountId: string) =>
  ctx.container.pool.oneFirst(
    sql.type(z.object({ sum: z.number() }))`
      select coalesce(sum(amount_micros), 0)::bigint as sum from ledger_entries where account_id = ${accountId}`,
  );

describe('a priced call on a live key', () => {
  it('of 200 at once on a balance that pays for exactly 100: 100 succeed, 100 get 402, balance ends at 0', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 100 * WRITE_PRICE });
    const responses = await Promise.all(Array.from({ length: 200 }, () => call(customer.token)));
    const succeeded = responses.filter((r) => r.statusCode === 200);
    const refused = responses.filter((r) => r.statusCode === 402);
    expect(succeeded).toHaveLength(100);
    expect(refused).toHaveLength(100);
    for (const response of refused) {
      expect(response.json().error).toMatchObject({ type: 'payment_required', code: 'PAYMENT_REQUIRED' });
      expect(response.headers['x-svc-cost-usd']).toBe('0.000000');
    }
    const balance = await ctx.container.billing.getBalance(customer.account.id);
    expect(balance.balance_micros).toBe(0);
    expect(await ledgerSum(customer.account.id)).toBe(0);
    expect(await writesOf(customer.app.id)).toBe(100);
    const headerTotal = succeeded.reduce(
      (sum, r) => sum + Math.round(Number(r.headers['x-svc-cost-usd']) * 1e6),
      0,
    );
    expect(headerTotal).toBe(100 * WRITE_PRICE);
    const usageLine = balance.ledger.find((entry) => entry.kind === 'usage');
    expect(usageLine).toMatchObject({
      amount_micros: -100 * WRITE_PRICE,
      app_id: customer.app.id,
      balance_after_usd: 0,
    });
  });

  it('is refused with 402 before any work when the balance is empty', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live' });
    const response = await call(customer.token);
    expect(response.statusCode).toBe(402);
    expect(response.json().error.message).toMatch(/prepaid balance/);
    expect(await writesOf(customer.app.id)).toBe(0);
  });

  it('that fails after its write is not charged, and its write does not stay', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 10 * WRITE_PRICE });
    ctx.app.log.level = 'silent';
    expect((await call(customer.token, '?fail=after-work')).statusCode).toBe(500);
    expect(await writesOf(customer.app.id)).toBe(0);
    expect((await ctx.container.billing.getBalance(customer.account.id)).balance_micros).toBe(
      10 * WRITE_PRICE,
    );
  });

  it('reports in its cost header exactly what the ledger took', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    let headers = 0;
    for (let i = 0; i < 7; i += 1) {
      const response = await call(customer.token);
      expect(response.statusCode).toBe(200);
      headers += Math.round(Number(response.headers['x-svc-cost-usd']) * 1e6);
    }
    const balance = await ctx.container.billing.getBalance(customer.account.id);
    expect(headers).toBe(7 * WRITE_PRICE);
    expect(1_000_000 - balance.balance_micros).toBe(headers);
    expect(await ledgerSum(customer.account.id)).toBe(balance.balance_micros);
  });
});

describe('a priced call on a test key', () => {
  it('is priced in its header and in usage, but never touches the balance, even an empty one', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'test' });
    for (let i = 0; i < 3; i += 1) {
      const response = await call(customer.token);
      expect(response.statusCode).toBe(200);
      expect(response.headers['x-svc-cost-usd']).toBe('0.000500');
    }
    const balance = await ctx.container.billing.getBalance(customer.account.id);
    expect(balance.balance_micros).toBe(0);
    expect(balance.ledger).toEqual([]);
    const usage = await ctx.container.billing.usageReport(customer.account.id, 'test', 1);
    expect(usage.usage).toEqual([
      expect.objectContaining({ product: 'writes', metric: 'calls', quantity: 3, cost_micros: 1_500 }),
    ]);
    expect(usage.total).toEqual({ cost_usd: 0.0015, cost_micros: 1_500, charged: false });
    expect(await ctx.container.billing.usageReport(customer.account.id, 'live', 1)).toMatchObject({
      usage: [],
    });
  });
});

describe('the UTC day', () => {
  it('splits usage and usage lines at midnight', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    ctx.clock.set('2026-06-30T23:59:59.500Z');
    await call(customer.token);
    await call(customer.token);
    ctx.clock.set('2026-07-01T00:00:00.000Z');
    await call(customer.token);
    const balance = await ctx.container.billing.getBalance(customer.account.id);
    const lines = balance.ledger.filter((entry) => entry.kind === 'usage');
    expect(lines.map((line) => [line.day, line.amount_micros])).toEqual([
      ['2026-07-01', -WRITE_PRICE],
      ['2026-06-30', -2 * WRITE_PRICE],
    ]);
    const usage = await ctx.container.billing.usageReport(customer.account.id, 'live', 2);
    expect(usage.usage.map((row) => [row.day, row.quantity])).toEqual([
      ['2026-07-01', 1],
      ['2026-06-30', 2],
    ]);
    expect(usage.from).toBe('2026-06-30');
    expect(usage.to).toBe('2026-07-01');
    expect((await ctx.container.billing.usageReport(customer.account.id, 'live', 1)).usage).toHaveLength(1);
    ctx.clock.set(new Date());
  });
});

describe('plans', () => {
  it('answer 402 on a paid-plan endpoint for Free, and let Pro and Scale through', async () => {
    const free = await createCustomer(ctx.container, { plan: 'free' });
    const refused = await ctx.app.inject({
      method: 'GET',
      url: '/test/paid-plan-only',
      headers: { authorization: `Bearer ${free.token}` },
      remoteAddress: uniqueAddress(),
    });
    expect(refused.statusCode).toBe(402);
    expect(refused.json().error).toMatchObject({ type: 'payment_required', code: 'PAYMENT_REQUIRED' });
    expect(refused.json().error.message).toMatch(/Pro or Scale plan/);
    for (const plan of ['pro', 'scale'] as const) {
      const customer = await createCustomer(ctx.container, { plan });
      const allowed = await ctx.app.inject({
        method: 'GET',
        url: '/test/paid-plan-only',
        headers: { authorization: `Bearer ${customer.token}` },
        remoteAddress: uniqueAddress(),
      });
      expect(allowed.statusCode).toBe(200);
    }
  });
});
