import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPricedProbeTable, pricedProbe } from './priced-probe.js';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  // promo.sends belongs to this file alone: its database override never reaches another test.
  ctx = await startTestApp({ routes: () => pricedProbe('promo', 'sends') });
  await createPricedProbeTable(ctx.container);
});
afterAll(async () => {
  await ctx.container.prices.resetToConfigured('promo', 'sends');
  await ctx.close();
});

const get = (context: TestContext, url: string, token: string) =>
  context.app.inject({
    method: 'GET',
    url,
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: uniqueAddress(),
  });

describe('GET /v1/pricing', () => {
  it('serves every priced metric, a realtime section and the free monthly allowances', async () => {
    const { token } = await createCustomer(ctx.container);
    const response = await get(ctx, '/v1/pricing', token);
    expect(response.statusCode).toBe(200);
    const table = response.json();
    const keys = table.prices.map((p: { product: string; metric: string }) => `${p.product}.${p.metric}`);
    expect(keys).toEqual(
      expect.arrayContaining([
        'writes.calls',
        'otp.sends',
        'promo.sends',
        'ai.generate_calls',
        'ai.chat_calls',
        'ai.moderate_calls',
        'chat.monthly_active_users',
        'live.hd_minutes',
        'live.fhd_minutes',
        'live.4k_minutes',
        'live.audio_minutes',
        'calls.hd_minutes',
        'calls.audio_minutes',
        'storage.gb_days',
        'storage.uploads',
        'storage.signed_urls',
        'bandwidth.gb',
      ]),
    );
    expect(table.realtime.chat).toEqual([
      expect.objectContaining({
        metric: 'monthly_active_users',
        unit: 'user',
        price_usd: 0.01,
        price_micros: 10_000,
      }),
    ]);
    expect(table.realtime.live.map((p: { metric: string }) => p.metric)).toEqual([
      'hd_minutes',
      'fhd_minutes',
      '4k_minutes',
      'audio_minutes',
    ]);
    expect(table.free_monthly_allowances).toEqual(
      expect.arrayContaining([
        { product: 'chat', metric: 'monthly_active_users', unit: 'user', quantity: 100 },
        { product: 'bandwidth', metric: 'gb', unit: 'GB', quantity: 10 },
      ]),
    );
  });
});

describe('a price change', () => {
  it('applies to the very next call', async () => {
    const { token } = await createCustomer(ctx.container);
    const post = () =>
      ctx.app.inject({
        method: 'POST',
        url: '/test/priced',
        headers: { authorization: `Bearer ${token}` },
        remoteAddress: uniqueAddress(),
      });
    expect((await post()).headers['x-svc-cost-usd']).toBe('0.002000');
    await ctx.container.prices.setPrice('promo', 'sends', 2_750);
    expect((await post()).headers['x-svc-cost-usd']).toBe('0.002750');
    const table = (await get(ctx, '/v1/pricing', token)).json();
    expect(table.prices.find((p: { product: string }) => p.product === 'promo')).toMatchObject({
      price_micros: 2_750,
    });
  });

  it('refuses unknown metrics and negative prices', async () => {
    await expect(ctx.container.prices.setPrice('promo', 'nope', 1)).rejects.toThrow(
      /unknown metric promo.nope/,
    );
    await expect(ctx.container.prices.setPrice('promo', 'sends', -1)).rejects.toThrow(/0 or more/);
    // AI generation answers its cost in whole thousandths of a dollar (cost_milli).
    await expect(ctx.container.prices.setPrice('ai', 'generate_calls', 2_500)).rejects.toThrow(
      /whole number of 1000 micro-dollars/,
    );
  });
});

describe('configured prices and allowances', () => {
  it('meter read bandwidth a moment later and charge a live balance for it, to the micro-dollar', async () => {
    // $1 per GB with no free allowance: a micro-dollar per kilobyte of response.
    const priced = await startTestApp({
      settings: { SVC_PRICES: 'bandwidth.gb=1', SVC_FREE_ALLOWANCES: 'bandwidth.gb=0' },
    });
    try {
      const customer = await createCustomer(priced.container, { mode: 'live', balanceMicros: 1_000_000 });
      let bytes = 0;
      for (let i = 0; i < 5; i += 1) {
        const response = await get(priced, '/v1/pricing', customer.token);
        expect(response.statusCode).toBe(200);
        // A read is not charged when it answers: its bytes are accrued and metered at the next flush.
        expect(response.headers['x-svc-cost-usd']).toBe('0.000000');
        bytes += Buffer.byteLength(response.body);
      }
      await priced.container.accrual.flush();
      const charged = Math.floor(bytes / 1_000);
      const balance = await priced.container.billing.getBalance(customer.account.id);
      expect(balance.balance_micros).toBe(1_000_000 - charged);
      const usage = await priced.container.billing.usageReport(customer.account.id, 'live', 1);
      expect(usage.usage).toEqual([
        expect.objectContaining({
          product: 'bandwidth',
          metric: 'gb',
          quantity: Math.round(bytes / 1e3) / 1e6,
          cost_micros: charged,
        }),
      ]);
      expect(usage.allowances.find((a) => a.product === 'bandwidth')).toBeUndefined();
    } finally {
      await priced.close();
    }
  });
});

describe('GET /v1/realtime/usage', () => {
  it('takes days 1-90 (default 30) and answers 422 outside', async () => {
    const { token } = await createCustomer(ctx.container);
    const usage = (await get(ctx, '/v1/realtime/usage', token)).json();
    expect(usage).toMatchObject({ mode: 'test', usage: [], total: { cost_micros: 0, charged: false } });
    const from = new Date(`${usage.to}T00:00:00Z`);
    from.setUTCDate(from.getUTCDate() - 29);
    expect(usage.from).toBe(from.toISOString().slice(0, 10));
    expect(usage.prices.realtime).toHaveProperty('live');
    expect(usage.allowances.length).toBeGreaterThan(0);
    for (const days of [1, 90])
      expect((await get(ctx, `/v1/realtime/usage?days=${days}`, token)).statusCode).toBe(200);
    for (const days of ['0', '91', 'x', '1.5']) {
      const response = await get(ctx, `/v1/realtime/usage?days=${days}`, token);
      expect(response.statusCode, `days=${days}`).toBe(422);
      expect(response.json().error.fields[0]).toMatchObject({ in: 'query', field: 'days' });
    }
  });
});
