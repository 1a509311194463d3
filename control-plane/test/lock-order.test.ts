import { randomUUID } from 'node:crypto';
import type { Interceptor } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledgerTotals } from './ledger.js';
import { attributes, deliver, participant } from './livekit-webhooks.js';
import { createCustomer, meterNow, startTestApp, type TestContext, uniqueAddress } from './support.js';

/**
 * Every transaction that locks several rows takes them in one order: sessions by id, then the
 * account, then allowances and usage rows by metric, then the usage line. A storm of concurrent writes
 * on one live account must never make PostgreSQL find a cycle (SQLSTATE 40P01, which slonik would
 * retry silently) or make a statement wait out its timeout (57014).
 */
const waits: string[] = [];
/** The accounts of each COMMIT's charges, in the order they are charged (their rows' order). */
const chargedAccounts: string[][] = [];
const watch: Interceptor = {
  name: 'lock-wait-watch',
  beforeQueryExecution: (_context, query) => {
    if (query.sql.trimStart().startsWith('insert into charges_at_commit'))
      chargedAccounts.push(query.values.filter((value) => /^acct_/.test(String(value))).map(String));
    return null;
  },
  queryExecutionError: (_context, _query, error) => {
    const code = (error as { code?: string }).code ?? (error.cause as { code?: string } | undefined)?.code;
    if (code === '40P01' || code === '57014') waits.push(code);
    return null;
  },
};

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp({
    interceptors: [watch],
    settings: {
      SVC_FREE_ALLOWANCES:
        'live.hd_minutes=0,live.fhd_minutes=0,calls.hd_minutes=0,calls.fhd_minutes=0,storage.uploads=0',
    },
  });
});
afterAll(async () => {
  await ctx.close();
});

describe('one lock order', () => {
  it('lets rooms finish, participants leave, priced calls, metering and top-ups of one account run at once', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000_000 });
    const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' as const };
    const { chat_prefix: prefix } = await ctx.container.realtime.ensure(payer);
    // Under a minute ago: never old enough for the reconciler of the running stack to close them first.
    const joinedAt = new Date(ctx.clock.now().getTime() - 50_000);

    // Six rooms, each with sessions of two qualities and two products, in opposite orders: metering a
    // room used to lock usage rows in the order of its sessions, and two rooms in opposite orders
    // (or a room and a leave) waited for each other.
    const rooms = Array.from({ length: 6 }, (_, i) => `${prefix}.storm-${i}-${randomUUID().slice(0, 8)}`);
    const people = rooms.map((room, r) =>
      Array.from({ length: 6 }, (_, p) => {
        const quality = (p + r) % 2 === 0 ? 'hd' : 'fhd';
        return participant(`P${r}${p}`, room, attributes(p < 3 ? 'live' : 'call', quality), joinedAt);
      }),
    );
    for (const who of people.flat()) {
      expect((await deliver(ctx, { event: 'participant_joined', ...who })).statusCode).toBe(200);
    }

    const storm = await Promise.all([
      ...rooms.map((room) => deliver(ctx, { event: 'room_finished', room: { name: room } })),
      ...people
        .flatMap((room) => room.slice(0, 2))
        .map((who) => deliver(ctx, { event: 'participant_left', ...who })),
      // A priced call's own insert references the account (a foreign-key lock on its row).
      ...Array.from({ length: 30 }, () =>
        ctx.app.inject({
          method: 'POST',
          url: '/v1/storage/uploads',
          headers: { authorization: `Bearer ${customer.token}` },
          remoteAddress: uniqueAddress(),
          payload: { name: 'a.txt', content_type: 'text/plain', size_bytes: 10 },
        }),
      ),
      ...Array.from({ length: 5 }, (_, i) =>
        ctx.container.billing.topUp({
          accountId: customer.account.id,
          amountMicros: 1_000,
          reference: `storm-${i}`,
        }),
      ),
      ...Array.from({ length: 5 }, () =>
        meterNow(ctx.container, payer, [{ product: 'bandwidth', metric: 'gb', quantity: 3_000_000_000 }]),
      ),
    ]);

    const statuses = storm.map((result) =>
      typeof result === 'object' && 'statusCode' in result ? result.statusCode : 200,
    );
    expect(statuses.filter((status) => status >= 300)).toEqual([]);
    expect(waits).toEqual([]);
    const totals = await ledgerTotals(ctx.container, customer.account.id);
    expect(totals.balance).toBe(totals.ledger);
    expect(totals.usageCost).toBe(totals.usageLines);
    // Every session was closed once and billed: 36 participants for 50 seconds each.
    const usage = await ctx.container.billing.usageReport(customer.account.id, 'live', 1);
    const minutes = usage.usage.filter((row) => row.product === 'live' || row.product === 'calls');
    expect(minutes.reduce((sum, row) => sum + row.quantity, 0)).toBeCloseTo((36 * 50) / 60, 6);
  });

  it('lets turns of priced writes of several accounts, on two replicas, run beside rooms finishing and top-ups', async () => {
    // A turn of uploads charges every account of the turn in one COMMIT, accounts in id order, as a
    // room's end and the reconciler meter theirs: two such transactions (two replicas' turns) must
    // never wait in a cycle.
    const replica = await startTestApp({ interceptors: [watch] });
    const customers = await Promise.all(
      Array.from({ length: 6 }, () =>
        createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000_000 }),
      ),
    );
    const joinedAt = new Date(ctx.clock.now().getTime() - 50_000);
    const rooms = await Promise.all(
      customers.map(async (customer, c) => {
        const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' as const };
        const { chat_prefix: prefix } = await ctx.container.realtime.ensure(payer);
        const room = `${prefix}.turns-${randomUUID().slice(0, 8)}`;
        for (const p of [0, 1]) {
          const who = participant(`T${c}${p}`, room, attributes('live', 'hd'), joinedAt);
          expect((await deliver(ctx, { event: 'participant_joined', ...who })).statusCode).toBe(200);
        }
        return room;
      }),
    );
    const storm = await Promise.all([
      ...Array.from({ length: 240 }, (_, i) =>
        (i % 2 === 0 ? ctx : replica).app.inject({
          method: 'POST',
          url: '/v1/storage/uploads',
          headers: { authorization: `Bearer ${customers[i % 6]!.token}` },
          remoteAddress: uniqueAddress(),
          payload: { name: 'a.txt', content_type: 'text/plain', size_bytes: 10 },
        }),
      ),
      ...rooms.map((room) => deliver(ctx, { event: 'room_finished', room: { name: room } })),
      ...customers.map((customer, i) =>
        ctx.container.billing.topUp({
          accountId: customer.account.id,
          amountMicros: 1_000,
          reference: `turns-${i}`,
        }),
      ),
    ]);
    await replica.close();
    const statuses = storm.map((result) =>
      typeof result === 'object' && 'statusCode' in result ? result.statusCode : 200,
    );
    expect(statuses.filter((status) => status >= 300)).toEqual([]);
    expect(waits).toEqual([]);
    const turns = chargedAccounts.filter((accounts) => accounts.length > 1);
    expect(turns.length).toBeGreaterThan(0);
    for (const accounts of turns) expect(accounts).toEqual([...accounts].sort());
    for (const customer of customers) {
      const totals = await ledgerTotals(ctx.container, customer.account.id);
      expect(totals.balance).toBe(totals.ledger);
      expect(totals.usageCost).toBe(totals.usageLines);
      const usage = await ctx.container.billing.usageReport(customer.account.id, 'live', 1);
      expect(usage.usage.find((row) => row.metric === 'uploads')?.quantity).toBe(40);
    }
  });
});
