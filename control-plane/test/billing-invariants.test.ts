import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Payer } from '../src/platform/caller.js';
import { ledgerTotals, orgUsageBothWays } from './ledger.js';
import { attributes, deliver, participant } from './livekit-webhooks.js';
import { createPricedProbeTable, pricedProbe } from './priced-probe.js';
import { createCustomer, meterNow, startTestApp, type TestContext, uniqueAddress } from './support.js';

/**
 * The billing invariants, as a property of random interleavings against the real PostgreSQL: after
 * every step (a few operations at once), a live account's balance equals the sum of its ledger, the
 * cost of its usage equals the sum of its usage lines, and its orgs' lines add up to its lines of all
 * orgs together, whatever mix of top-ups, priced calls (paid or refused; alone, in turns of writes or
 * in turns of reads), usage metered afterwards (going below zero or not; an org's or the app's own),
 * webhook minutes, rooms finishing, reconciliation and accrued bandwidth ran.
 */
let ctx: TestContext;
beforeAll(async () => {
  // No free allowances on the metrics used, so that every operation moves money.
  ctx = await startTestApp({
    routes: () => pricedProbe(),
    settings: {
      SVC_FREE_ALLOWANCES: 'bandwidth.gb=0,live.hd_minutes=0,live.fhd_minutes=0,calls.hd_minutes=0',
    },
  });
  await createPricedProbeTable(ctx.container);
});
afterAll(async () => {
  await ctx.close();
});

/** The three ways a priced call is charged (platform/metering.ts): alone, in a turn of writes, a read. */
const PRICED_PATHS = {
  alone: { method: 'POST', url: '/test/priced' },
  together: { method: 'POST', url: '/test/priced-together' },
  read: { method: 'GET', url: '/test/priced-read' },
} as const;

type Operation =
  | { kind: 'top-up'; micros: number }
  | { kind: 'priced'; test: boolean; path: keyof typeof PRICED_PATHS }
  | { kind: 'metered'; bytes: number; org?: string }
  | { kind: 'accrued'; bytes: number }
  | { kind: 'minutes'; seconds: number; quality: 'hd' | 'fhd'; product: 'live' | 'call' }
  | { kind: 'room-finished'; seconds: number }
  | { kind: 'reconcile' };

const operation: fc.Arbitrary<Operation> = fc.oneof(
  fc.record({ kind: fc.constant('top-up' as const), micros: fc.integer({ min: 1, max: 20_000 }) }),
  fc.record({
    kind: fc.constant('priced' as const),
    test: fc.boolean(),
    path: fc.constantFrom(...(Object.keys(PRICED_PATHS) as (keyof typeof PRICED_PATHS)[])),
  }),
  fc.record({
    kind: fc.constant('metered' as const),
    bytes: fc.integer({ min: 1, max: 400_000_000 }),
    // An org's usage is also added to the app's line of all its orgs.
    org: fc.constantFrom(undefined, 'org_a', 'org_b'),
  }),
  fc.record({ kind: fc.constant('accrued' as const), bytes: fc.integer({ min: 1, max: 400_000_000 }) }),
  fc.record({
    kind: fc.constant('minutes' as const),
    seconds: fc.integer({ min: 1, max: 59 }),
    quality: fc.constantFrom('hd' as const, 'fhd' as const),
    product: fc.constantFrom('live' as const, 'call' as const),
  }),
  fc.record({ kind: fc.constant('room-finished' as const), seconds: fc.integer({ min: 1, max: 59 }) }),
  fc.constant({ kind: 'reconcile' as const }),
);

describe('the ledger', () => {
  it('adds up after every step of random concurrent billing', { timeout: 300_000 }, async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 10_000 }),
        fc.array(fc.array(operation, { minLength: 1, maxLength: 4 }), { minLength: 2, maxLength: 6 }),
        async (opening, steps) => {
          run += 1;
          const live = await createCustomer(ctx.container, { mode: 'live', balanceMicros: opening });
          const { token: testToken } = await ctx.container.accounts.createKey({
            appId: live.app.id,
            kind: 'secret',
            mode: 'test',
          });
          const payer: Payer = { accountId: live.account.id, appId: live.app.id, mode: 'live' };
          const { chat_prefix: prefix } = await ctx.container.realtime.ensure(payer);
          const now = () => ctx.clock.now().getTime();
          const room = (name: string) => `${prefix}.${name}-${run}-${Math.random().toString(36).slice(2, 8)}`;

          const apply = async (op: Operation, index: number): Promise<void> => {
            switch (op.kind) {
              case 'top-up':
                await ctx.container.billing.topUp({
                  accountId: live.account.id,
                  amountMicros: op.micros,
                  reference: `step-${index}-${Math.random()}`,
                });
                return;
              case 'priced': {
                const response = await ctx.app.inject({
                  ...PRICED_PATHS[op.path],
                  headers: { authorization: `Bearer ${op.test ? testToken : live.token}` },
                  remoteAddress: uniqueAddress(),
                });
                expect([200, 402]).toContain(response.statusCode);
                return;
              }
              case 'metered':
                await meterNow(ctx.container, { ...payer, orgId: op.org }, [
                  { product: 'bandwidth', metric: 'gb', quantity: op.bytes },
                ]);
                return;
              case 'accrued':
                await ctx.container.accrual.add(payer, {
                  product: 'bandwidth',
                  metric: 'gb',
                  quantity: op.bytes,
                });
                await ctx.container.accrual.flush();
                return;
              case 'minutes': {
                const who = participant(
                  'M',
                  room('m'),
                  attributes(op.product, op.quality),
                  new Date(now() - op.seconds * 1000),
                );
                expect((await deliver(ctx, { event: 'participant_joined', ...who })).statusCode).toBe(200);
                expect((await deliver(ctx, { event: 'participant_left', ...who })).statusCode).toBe(200);
                return;
              }
              case 'room-finished': {
                const name = room('f');
                const joined = new Date(now() - op.seconds * 1000);
                const people = [
                  participant('A', name, attributes('live', 'hd'), joined),
                  participant('B', name, attributes('live', 'fhd'), joined),
                ];
                for (const who of people) await deliver(ctx, { event: 'participant_joined', ...who });
                // One leave races the room's end: each session is closed and billed once.
                const results = await Promise.all([
                  deliver(ctx, { event: 'participant_left', ...people[0]! }),
                  deliver(ctx, { event: 'room_finished', room: { name } }),
                ]);
                expect(results.map((result) => result.statusCode)).toEqual([200, 200]);
                return;
              }
              case 'reconcile': {
                // A session LiveKit no longer lists, seen last before the grace period: closed by reconcile.
                const who = participant('R', room('r'), attributes('call', 'hd'), new Date(now() - 120_000));
                await deliver(ctx, { event: 'participant_joined', ...who });
                await ctx.container.live.reconcile();
                return;
              }
            }
          };

          for (const [index, step] of steps.entries()) {
            await Promise.all(step.map((op, i) => apply(op, index * 10 + i)));
            const totals = await ledgerTotals(ctx.container, live.account.id);
            expect(totals.balance, `balance after step ${index}`).toBe(totals.ledger);
            expect(totals.usageCost, `usage lines after step ${index}`).toBe(totals.usageLines);
            const orgs = await orgUsageBothWays(ctx.container, live.account.id);
            expect(orgs.allOrgs, `all orgs' lines after step ${index}`).toBe(orgs.byOrg);
          }
        },
      ),
      { numRuns: 40, endOnFailure: true },
    );
  });
});
