import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

describe('top-ups', () => {
  it('count once per reference, even when replayed concurrently', async () => {
    const { account } = await createCustomer(ctx.container);
    const topUp = () =>
      ctx.container.billing.topUp({
        accountId: account.id,
        amountMicros: 25_000_000,
        reference: 'invoice-1',
      });
    const results = await Promise.all(Array.from({ length: 10 }, topUp));
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
    expect(new Set(results.map((r) => r.entry.id)).size).toBe(1);
    await ctx.container.billing.topUp({
      accountId: account.id,
      amountMicros: 500_000,
      reference: 'invoice-2',
    });
    const balance = await ctx.container.billing.getBalance(account.id);
    expect(balance.balance_micros).toBe(25_500_000);
    expect(balance.balance_usd).toBe(25.5);
  });

  it('refuse a reused reference with another amount, and non-positive amounts', async () => {
    const { account } = await createCustomer(ctx.container);
    await ctx.container.billing.topUp({ accountId: account.id, amountMicros: 1_000_000, reference: 'r' });
    await expect(
      ctx.container.billing.topUp({ accountId: account.id, amountMicros: 2_000_000, reference: 'r' }),
    ).rejects.toThrow(/already used for a different amount/);
    await expect(
      ctx.container.billing.topUp({ accountId: account.id, amountMicros: 0, reference: 'zero' }),
    ).rejects.toThrow(/positive/);
    await expect(
      ctx.container.billing.topUp({ accountId: 'acct_missing', amountMicros: 1, reference: 'x' }),
    ).rejects.toThrow(/Account acct_missing not found/);
  });
});

describe('GET /v1/realtime/balance', () => {
  it('shows the balance and the movements newest first, at most 50', async () => {
    const { account, token } = await createCustomer(ctx.container);
    for (let i = 1; i <= 52; i += 1) {
      ctx.clock.advance(1_000);
      await ctx.container.billing.topUp({ accountId: account.id, amountMicros: i, reference: `r${i}` });
    }
    const response = await ctx.app.inject({
      method: 'GET',
      url: '/v1/realtime/balance',
      headers: { authorization: `Bearer ${token}` },
      remoteAddress: uniqueAddress(),
    });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    expect(body.balance_micros).toBe((52 * 53) / 2);
    expect(body.ledger).toHaveLength(50);
    expect(body.ledger[0]).toMatchObject({
      kind: 'topup',
      amount_micros: 52,
      amount_usd: 0.000052,
      reference: 'r52',
      balance_after_usd: 0.001378,
    });
    expect(body.ledger[49].reference).toBe('r3');
    expect(response.headers['x-svc-cost-usd']).toBe('0.000000');
  });
});
