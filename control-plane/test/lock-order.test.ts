import { randomUUID } from 'node:crypto';
import { type Interceptor, sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { socialStore } from '../src/modules/social/store.js';
import { callerOrder, type Payer } from '../src/platform/caller.js';
import { createMetering, type Metering, TURNS_AT_ONCE } from '../src/platform/metering.js';
import { inCodeUnitOrder } from '../src/platform/ordering.js';
import { inTransaction, type Transaction } from '../src/platform/transaction.js';
import { ledgerTotals, orgUsageBothWays } from './ledger.js';
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
/** The payers (account and mode) of each svc_meter statement, in the order they ran. */
const meteredPayers: string[] = [];
const watch: Interceptor = {
  name: 'lock-wait-watch',
  beforeQueryExecution: (_context, query) => {
    if (query.sql.trimStart().startsWith('insert into charges_at_commit'))
      chargedAccounts.push(query.values.filter((value) => /^acct_/.test(String(value))).map(String));
    if (query.sql.includes('from svc_meter(')) meteredPayers.push(`${query.values[0]} ${query.values[2]}`);
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

  it('lets a test key meter two orgs in one transaction while another meters one of them', async () => {
    // A room's end meters each org's minutes in turn; a leave meters one org's. Both add to the
    // app's line of all its orgs, which a test key's charge reaches with no account row locked.
    const customer = await createCustomer(ctx.container, { mode: 'test' });
    const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'test' as const };
    const minutes = [{ product: 'live', metric: 'hd_minutes', quantity: 3 }];
    const meter = (tx: Transaction, orgId: string) =>
      ctx.container.metering.meter(tx, { ...payer, orgId }, minutes);
    const signal = () => {
      let done!: (value: number) => void;
      const promise = new Promise<number>((resolve) => {
        done = resolve;
      });
      return { promise, done: (value = 0) => done(value) };
    };
    const firstMetered = signal();
    const leaveWaits = signal();
    const leaveStarted = signal();
    const roomEnd = inTransaction(ctx.container.pool, async (tx) => {
      await meter(tx, 'org_a');
      firstMetered.done();
      await leaveWaits.promise;
      await meter(tx, 'org_b');
    });
    await firstMetered.promise;
    const leave = inTransaction(ctx.container.pool, async (tx) => {
      leaveStarted.done(
        await tx.oneFirst(sql.type(z.object({ pid: z.number() }))`select pg_backend_pid() as pid`),
      );
      await meter(tx, 'org_b');
    });
    // The room's end meters org_b only once the leave waits for a lock (org_b's line held, before).
    const pid = await leaveStarted.promise;
    await expect
      .poll(() =>
        ctx.container.pool.oneFirst(
          sql.type(z.object({ waiting: z.string() }))`
            select coalesce(wait_event_type, '') as waiting from pg_stat_activity where pid = ${pid}`,
        ),
      )
      .toBe('Lock');
    leaveWaits.done();
    await Promise.all([roomEnd, leave]);
    expect(waits).toEqual([]);
    const orgs = await orgUsageBothWays(ctx.container, customer.account.id);
    expect(JSON.parse(orgs.allOrgs)).toEqual([expect.objectContaining({ quantity: 9 })]);
    expect(orgs.allOrgs).toBe(orgs.byOrg);
  });

  it("meters an account's live payers before its test ones in one flush (its row before its test lock)", async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const other = await ctx.container.accounts.createApp({ accountId: customer.account.id, name: 'second' });
    // The test payer's app sorts first: by app alone, it would be metered first.
    const [first, second] = [customer.app.id, other.id].sort(inCodeUnitOrder);
    const bytes = { product: 'bandwidth', metric: 'gb', quantity: 1_000_000 };
    meteredPayers.length = 0;
    await Promise.all([
      ctx.container.accrual.add({ accountId: customer.account.id, appId: first!, mode: 'test' }, bytes),
      ctx.container.accrual.add({ accountId: customer.account.id, appId: second!, mode: 'live' }, bytes),
    ]);
    await ctx.container.accrual.flush();
    expect(meteredPayers.filter((metered) => metered.startsWith(customer.account.id))).toEqual([
      `${customer.account.id} live`,
      `${customer.account.id} test`,
    ]);
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

describe('turns of priced writes charged together', () => {
  const usages = [{ product: 'writes', metric: 'calls', quantity: 1 }];
  const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  /** A second replica's metering, on the same database. */
  const otherReplica = () => {
    const { pool, clock, prices, standing } = ctx.container;
    return createMetering({ pool, clock, prices, standing });
  };
  interface Work {
    order: string;
    run: (tx: Transaction) => Promise<unknown>;
  }
  /**
   * One turn of `works` on a metering: first calls go alone, as many as it runs turns at once, and
   * the works, charged while they do, wait and make the next turn together. Answers each work's
   * transaction id.
   */
  async function turnOf(metering: Metering, payer: Payer, works: Work[]) {
    const alone = Promise.all(
      Array.from({ length: TURNS_AT_ONCE }, () =>
        metering.charge(payer, usages, async () => 'alone', { together: { order: '' } }),
      ),
    );
    const charged = works.map(({ order, run }) =>
      metering.charge(
        payer,
        usages,
        async (tx) => {
          await run(tx);
          return tx.oneFirst(sql.unsafe`select txid_current()::text`);
        },
        { together: { order } },
      ),
    );
    await alone;
    return (await Promise.all(charged)).map(({ result }) => result);
  }
  /** Locks a row first, then holds it a while, in one statement: a slow first statement. */
  const lockThenHold =
    (table: 'test_turn_rows' | 'profiles', key: string | number, runs: string[]) =>
    async (tx: Transaction) => {
      runs.push(String(key));
      const column = table === 'profiles' ? sql.identifier(['pk']) : sql.identifier(['id']);
      await tx.query(sql.unsafe`
        with locked as (select 1 from ${sql.identifier([table])} where ${column} = ${key} for no key update)
        select pg_sleep(0.3) from locked`);
    };

  async function liveCustomer() {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const payer: Payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' };
    return { ...customer, payer };
  }

  it('on two replicas take the rows their first statements lock in their callers’ order', async () => {
    waits.length = 0;
    const { payer, app } = await liveCustomer();
    const [a, b] = [`a-${app.id}`, `b-${app.id}`];
    await ctx.container.pool.query(
      sql.unsafe`create table if not exists test_turn_rows (id text primary key)`,
    );
    await ctx.container.pool.query(sql.unsafe`insert into test_turn_rows values (${a}), (${b})`);
    const runs: string[] = [];
    const work = (row: string, before = 0): Work => ({
      order: row,
      run: async (tx) => {
        await sleep(before);
        await lockThenHold('test_turn_rows', row, runs)(tx);
      },
    });
    // The replicas get the works in opposite orders, and on the first one the work that comes first
    // in callers' order takes a while before its first statement: started together, its second work
    // would lock its row first.
    const txids = await Promise.all([
      turnOf(ctx.container.metering, payer, [work(b), work(a, 100)]),
      turnOf(otherReplica(), payer, [work(a), work(b)]),
    ]);
    for (const turn of txids) expect(new Set(turn).size).toBe(1);
    // A deadlock would have rolled a turn back and run its two works again, alone.
    expect(waits).toEqual([]);
    expect(runs.sort()).toEqual([a, a, b, b]);
  });

  it('and a follow lock two authors in one order: by user id, whatever their keys', async () => {
    waits.length = 0;
    const { payer } = await liveCustomer();
    // b's profile is made first, so its key is the lower one; a comes first by user id.
    const [b, a] = [`b-${randomUUID()}`, `a-${randomUUID()}`];
    const pks = new Map<string, number>();
    for (const userId of [b, a]) {
      const profile = await socialStore(ctx.container.pool).upsertProfile(payer, {
        userId,
        username: `u_${randomUUID().slice(0, 8)}`,
        fullName: '',
        category: '',
        at: ctx.container.clock.now(),
      });
      pks.set(userId, profile.pk);
    }
    const pkOf = (userId: string) => pks.get(userId)!;
    expect(pkOf(b)).toBeLessThan(pkOf(a));

    const runs: string[] = [];
    const publishLike = (userId: string): Work => ({
      order: callerOrder({ ...payer, userId }),
      run: lockThenHold('profiles', pkOf(userId), runs),
    });
    const turn = turnOf(ctx.container.metering, payer, [publishLike(b), publishLike(a)]);
    // While the turn holds a's profile, b follows a: by key it would take b's first.
    await sleep(150);
    const followed = await inTransaction(ctx.container.pool, (tx) =>
      socialStore(tx).follow(pkOf(b), pkOf(a), ctx.container.clock.now()),
    );
    expect(new Set(await turn).size).toBe(1);
    expect(followed.isNew).toBe(true);
    expect(waits).toEqual([]);
    expect(runs.sort()).toEqual([String(pkOf(a)), String(pkOf(b))].sort());
  });
});
