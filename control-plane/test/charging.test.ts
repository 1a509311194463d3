import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ledgerTotals, orgUsageBothWays } from './ledger.js';
import { createPricedProbeTable, pricedProbe } from './priced-probe.js';
import {
  callWithKey,
  createCustomer,
  meterNow,
  startTestApp,
  type TestContext,
  uniqueAddress,
} from './support.js';

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

/** Priced calls charged in turns: reads (nothing written), and writes declared `chargedTogether`. */
const TURNS = {
  read: { method: 'GET', url: '/test/priced-read' },
  together: { method: 'POST', url: '/test/priced-together' },
} as const;

describe.each(Object.keys(TURNS) as (keyof typeof TURNS)[])('priced calls taken in turns (%s)', (path) => {
  const send = (context: TestContext, token: string, query = '') =>
    context.app.inject({
      method: TURNS[path].method,
      url: `${TURNS[path].url}${query}`,
      headers: { authorization: `Bearer ${token}` },
      remoteAddress: uniqueAddress(),
    });
  const costOf = (response: { headers: Record<string, unknown> }) =>
    Math.round(Number(response.headers['x-svc-cost-usd']) * 1e6);
  const writes = path === 'together' ? (count: number) => count : () => 0;

  it('of 200 at once on a balance that pays for exactly 100: 100 succeed, 100 get 402, balance ends at 0', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 100 * WRITE_PRICE });
    const responses = await Promise.all(Array.from({ length: 200 }, () => send(ctx, customer.token)));
    const succeeded = responses.filter((r) => r.statusCode < 300);
    expect(succeeded).toHaveLength(100);
    expect(responses.filter((r) => r.statusCode === 402)).toHaveLength(100);
    for (const response of succeeded) expect(costOf(response)).toBe(WRITE_PRICE);
    expect((await ctx.container.billing.getBalance(customer.account.id)).balance_micros).toBe(0);
    expect(await ledgerSum(customer.account.id)).toBe(0);
    expect(await writesOf(customer.app.id)).toBe(writes(100));
  });

  it('of many accounts at once charge each account for its own calls, to the micro-dollar', async () => {
    const customers = await Promise.all(
      Array.from({ length: 8 }, () =>
        createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000 * WRITE_PRICE }),
      ),
    );
    const responses = await Promise.all(
      Array.from({ length: 80 }, (_, i) => send(ctx, customers[i % 8]!.token)),
    );
    expect(responses.map((response) => response.statusCode).filter((status) => status >= 300)).toEqual([]);
    for (const customer of customers) {
      const balance = await ctx.container.billing.getBalance(customer.account.id);
      expect(balance.balance_micros).toBe(990 * WRITE_PRICE);
      expect(await ledgerSum(customer.account.id)).toBe(balance.balance_micros);
      expect(await writesOf(customer.app.id)).toBe(writes(10));
    }
  });

  it('give the free allowance to the first of them and report what each paid, adding up to the ledger', async () => {
    const allowing = await startTestApp({
      routes: () => pricedProbe(),
      settings: { SVC_FREE_ALLOWANCES: 'writes.calls=30' },
    });
    try {
      await createPricedProbeTable(allowing.container);
      const balance = 50 * WRITE_PRICE + 1;
      const customer = await createCustomer(allowing.container, { mode: 'live', balanceMicros: balance });
      const responses = await Promise.all(Array.from({ length: 100 }, () => send(allowing, customer.token)));
      const succeeded = responses.filter((r) => r.statusCode < 300);
      expect(succeeded).toHaveLength(80);
      expect(responses.filter((r) => r.statusCode === 402)).toHaveLength(20);
      const costs = succeeded.map(costOf);
      expect(costs.filter((cost) => cost === 0)).toHaveLength(30);
      expect(costs.filter((cost) => cost === WRITE_PRICE)).toHaveLength(50);
      const after = await allowing.container.billing.getBalance(customer.account.id);
      expect(after.balance_micros).toBe(1);
      expect(balance - after.balance_micros).toBe(costs.reduce((sum, cost) => sum + cost, 0));
      const usage = await allowing.container.billing.usageReport(customer.account.id, 'live', 1);
      expect(usage.usage).toEqual([
        expect.objectContaining({
          product: 'writes',
          metric: 'calls',
          quantity: 80,
          cost_micros: 50 * WRITE_PRICE,
        }),
      ]);
    } finally {
      await allowing.close();
    }
  });

  if (path === 'together') {
    it('that fail in a turn take nothing with them: the others write and pay as if alone', async () => {
      const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
      ctx.app.log.level = 'silent';
      const responses = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          send(ctx, customer.token, i % 3 === 0 ? '?fail=after-work' : ''),
        ),
      );
      expect(responses.filter((r) => r.statusCode === 500)).toHaveLength(20);
      expect(responses.filter((r) => r.statusCode === 200)).toHaveLength(40);
      expect(await writesOf(customer.app.id)).toBe(40);
      const balance = await ctx.container.billing.getBalance(customer.account.id);
      expect(balance.balance_micros).toBe(1_000_000 - 40 * WRITE_PRICE);
      expect(await ledgerSum(customer.account.id)).toBe(balance.balance_micros);
    });
  }
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

describe('the usage report', () => {
  it("counts each org's usage once, beside the app's own", async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' as const };
    const writes = (quantity: number) => [{ product: 'writes', metric: 'calls', quantity }];
    await meterNow(ctx.container, payer, writes(1));
    await meterNow(ctx.container, { ...payer, orgId: 'org_a' }, writes(2));
    await meterNow(ctx.container, { ...payer, orgId: 'org_a' }, writes(3));
    await meterNow(ctx.container, { ...payer, orgId: 'org_b' }, writes(4));

    const report = await ctx.container.billing.usageReport(customer.account.id, 'live', 1);
    expect(report.usage).toEqual([
      expect.objectContaining({
        product: 'writes',
        metric: 'calls',
        quantity: 10,
        cost_micros: 10 * WRITE_PRICE,
      }),
    ]);
    expect(report.total.cost_micros).toBe(10 * WRITE_PRICE);
    const totals = await ledgerTotals(ctx.container, customer.account.id);
    expect(totals.usageLines).toBe(10 * WRITE_PRICE);
    const orgs = await orgUsageBothWays(ctx.container, customer.account.id);
    expect(JSON.parse(orgs.allOrgs)).toEqual([
      expect.objectContaining({ quantity: 9, cost_micros: 9 * WRITE_PRICE }),
    ]);
    expect(orgs.allOrgs).toBe(orgs.byOrg);
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

describe('a live balance at zero or below', () => {
  const keyed = (token: string, method: 'POST' | 'GET', url: string, payload?: object) =>
    callWithKey(ctx.app, token, method, url, payload);
  const upload = { name: 'a.txt', content_type: 'text/plain', size_bytes: 1 };

  it('refuses priced calls with 402 even inside a free allowance, and mints', async () => {
    // Uploads have a free monthly allowance: the first ones cost nothing, but an empty balance pays for none.
    const customer = await createCustomer(ctx.container, { mode: 'live' });
    for (const [method, url, payload] of [
      ['POST', '/v1/storage/uploads', upload],
      ['POST', '/test/priced', undefined],
      ['POST', '/v1/realtime/chat/tokens', { user_id: 'ana' }],
      ['POST', '/v1/realtime/live/tokens', { room: 'r', identity: 'ana' }],
    ] as const) {
      const refused = await keyed(customer.token, method, url, payload);
      expect(refused.statusCode, url).toBe(402);
      expect(refused.json().error.code).toBe('PAYMENT_REQUIRED');
    }
    expect((await keyed(customer.token, 'GET', '/v1/storage/objects')).json().items).toEqual([]);

    // One micro-dollar is enough for a call the allowance pays for.
    await ctx.container.billing.topUp({ accountId: customer.account.id, amountMicros: 1, reference: 'one' });
    const inside = await keyed(customer.token, 'POST', '/v1/storage/uploads', upload);
    expect(inside.statusCode).toBe(201);
    expect(inside.headers['x-svc-cost-usd']).toBe('0.000000');
  });

  it('records usage known afterwards in full, shows what is owed, and takes it back from the next top-up', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 700 });
    const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' as const };
    // 3 writes (1,500 micro-dollars) known only afterwards, on a balance of 700.
    expect(await meterNow(ctx.container, payer, [{ product: 'writes', metric: 'calls', quantity: 3 }])).toBe(
      1_500,
    );
    const owed = await ctx.container.billing.getBalance(customer.account.id);
    expect(owed).toMatchObject({ balance_micros: -800, owed_micros: 800, owed_usd: 0.0008 });
    expect(owed.ledger.find((entry) => entry.kind === 'usage')).toMatchObject({
      kind: 'usage',
      amount_micros: -1_500,
      balance_after_usd: -0.0008,
    });
    const totals = await ledgerTotals(ctx.container, customer.account.id);
    expect([totals.balance, totals.usageCost]).toEqual([totals.ledger, totals.usageLines]);

    // Owing, the account pays for nothing new.
    expect((await call(customer.token)).statusCode).toBe(402);
    expect(
      (await keyed(customer.token, 'POST', '/v1/realtime/chat/tokens', { user_id: 'ana' })).statusCode,
    ).toBe(402);

    await ctx.container.billing.topUp({
      accountId: customer.account.id,
      amountMicros: 1_000,
      reference: 'repay',
    });
    expect((await ctx.container.billing.getBalance(customer.account.id)).balance_micros).toBe(200);
    expect((await call(customer.token)).statusCode).toBe(402); // 200 cannot pay 500
    await ctx.container.billing.topUp({
      accountId: customer.account.id,
      amountMicros: 300,
      reference: 'more',
    });
    expect((await call(customer.token)).statusCode).toBe(200);
    expect((await ctx.container.billing.getBalance(customer.account.id)).balance_micros).toBe(0);
    expect(
      (await keyed(customer.token, 'POST', '/v1/realtime/chat/tokens', { user_id: 'ana' })).statusCode,
    ).toBe(402);
  });
});
