import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type BatchProcessor,
  batchClaimer,
  batchKey,
  createAccrual,
  pendingKey,
} from '../src/platform/accrual.js';
import { createCustomer, freePort, startTestApp, type TestContext } from './support.js';

let port: number;
let redis: ChildProcess;
let ctx: TestContext;

/** A real Redis of this test's own, so that stopping it leaves the shared test Redis alone. */
async function startRedis(): Promise<void> {
  redis = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const deadline = Date.now() + 10_000;
  while ((await ctx?.container.redis.ping().catch(() => undefined)) !== 'PONG' && ctx) {
    if (Date.now() > deadline) throw new Error('the test Redis did not start');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

beforeAll(async () => {
  port = await freePort();
  await startRedis();
  // $1 per GB with no free allowance: a micro-dollar per kilobyte.
  ctx = await startTestApp({
    settings: {
      SVC_REDIS_URL: `redis://127.0.0.1:${port}/0`,
      SVC_PRICES: 'bandwidth.gb=1',
      SVC_FREE_ALLOWANCES: 'bandwidth.gb=0',
    },
  });
});
afterAll(async () => {
  redis.kill('SIGKILL');
  await ctx.close();
});

describe('usage counted in process', () => {
  it('is kept while Redis cannot take it, and charged in full once it can', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' as const };
    for (const quantity of [40_000, 2_000])
      await ctx.container.accrual.add(payer, { product: 'bandwidth', metric: 'gb', quantity });

    redis.kill('SIGTERM');
    await once(redis, 'exit');
    await expect(ctx.container.accrual.flush()).rejects.toThrow();
    // Counted again while Redis is away.
    await ctx.container.accrual.add(payer, { product: 'bandwidth', metric: 'gb', quantity: 8_000 });

    await startRedis();
    await ctx.container.accrual.flush();
    const balance = await ctx.container.billing.getBalance(customer.account.id);
    expect(balance.balance_micros).toBe(1_000_000 - 50);
    // Nothing is handed over twice.
    await ctx.container.accrual.flush();
    expect((await ctx.container.billing.getBalance(customer.account.id)).balance_micros).toBe(1_000_000 - 50);
  });
});

describe('a hand-over Redis ran after its answer was given up on', () => {
  it('is counted once when it is sent again', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' as const };
    const add = (quantity: number) =>
      ctx.container.accrual.add(payer, { product: 'bandwidth', metric: 'gb', quantity });
    // A first hand-over, so that Redis knows the script and the next one is a single command.
    await add(1_000);
    await ctx.container.accrual.flush();

    await add(7_000);
    // Redis holds writes for longer than the client waits for an answer (2 s), then runs them.
    await ctx.container.redis.call('CLIENT', 'PAUSE', '2500', 'WRITE');
    await expect(ctx.container.accrual.flush()).rejects.toThrow(/timed out/);
    await new Promise((resolve) => setTimeout(resolve, 700));
    await add(2_000);
    await ctx.container.accrual.flush();
    expect((await ctx.container.billing.getBalance(customer.account.id)).balance_micros).toBe(1_000_000 - 10);
  });
});

describe('a claim of a batch run twice', () => {
  it('keeps the batch it claimed, and what was pending since stays pending', async () => {
    const { redis: client } = ctx.container;
    const claim = batchClaimer(client);
    await client.hset(pendingKey('twice'), 'first', 1);
    expect(await claim('twice', 'b1')).toBe(1);
    await client.hset(pendingKey('twice'), 'second', 2);
    // The same command again, as a client sends it after a reconnect when its answer was lost.
    expect(await claim('twice', 'b1')).toBe(1);
    expect(await client.hgetall(batchKey('twice', 'b1'))).toEqual({ first: '1' });
    expect(await client.hgetall(pendingKey('twice'))).toEqual({ second: '2' });
    await client.del(batchKey('twice', 'b1'), pendingKey('twice'));
    await client.zrem('svc:accrued:batches', 'twice:b1');
  });
});

describe('usage of an account that no longer exists', () => {
  it('is dropped with a notice, and never holds back the other accounts of its batch', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' as const };
    // Sorted first in its batch: say, usage counted before a restore of an older database.
    const gone = { accountId: 'acct_0000000000gone', appId: 'app_0000000000gone', mode: 'live' as const };
    await ctx.container.accrual.add(gone, { product: 'bandwidth', metric: 'gb', quantity: 5_000 });
    await ctx.container.accrual.add(payer, { product: 'bandwidth', metric: 'gb', quantity: 3_000 });

    await ctx.container.accrual.flush();
    expect((await ctx.container.billing.getBalance(customer.account.id)).balance_micros).toBe(1_000_000 - 3);
    // The batch is done with: the next flush has nothing left to fail on.
    await ctx.container.accrual.flush();
    expect((await ctx.container.billing.getBalance(customer.account.id)).balance_micros).toBe(1_000_000 - 3);
  });
});

/** Another replica's accrual on the test's Redis and database, with no kinds but usage's. */
const replica = () => {
  const { pool, redis, clock, metering, prices } = ctx.container;
  return createAccrual({ pool, redis, clock, metering, prices });
};

/** A processor that records each batch it applies in `applied`, as `field=count,…`. */
const recordingInto =
  (applied: string[]): BatchProcessor =>
  async (_batch, entries) => {
    applied.push(entries.map(([field, count]) => `${field}=${count}`).join());
  };

describe("a flush beside another replica's flush", () => {
  it('waits for the batch the other replica claimed from under it', async () => {
    const client = ctx.container.redis;
    const [first, second] = [replica(), replica()];
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    let secondFlush: Promise<void> | undefined;
    const applied: string[] = [];
    // The first replica claims the X batch; while it applies it, the second replica's flush begins,
    // finds X empty and claims Y, which the first replica then finds empty too.
    first.register('race-x', async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      secondFlush = second.flush();
      while (
        !(await client.zrange('svc:accrued:batches', '0', '-1')).some((member) =>
          member.startsWith('race-y:'),
        )
      )
        await new Promise((resolve) => setTimeout(resolve, 5));
    });
    second.register('race-x', async () => {
      applied.push('x by the second replica');
    });
    first.register('race-y', async () => {
      applied.push('y by the first replica');
    });
    second.register('race-y', async (_batch, entries) => {
      await held;
      applied.push(`y: ${entries.map(([field, count]) => `${field}=${count}`).join()}`);
    });
    await client.hset(pendingKey('race-x'), 'entry', 1);
    await client.hset(pendingKey('race-y'), 'entry', 2);

    let firstDone = false;
    const firstFlush = first.flush().then(() => {
      firstDone = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(firstDone).toBe(false);
    release();
    await firstFlush;
    expect(applied).toEqual(['y: entry=2']);
    await secondFlush;
  });
});

describe('a batch whose apply fails', () => {
  it('never holds back the batches of other kinds', async () => {
    const accrual = replica();
    const applied: string[] = [];
    accrual.register('broken', async () => {
      throw new Error('PostgreSQL refused it');
    });
    accrual.register('sound', recordingInto(applied));
    await ctx.container.redis.hset(pendingKey('broken'), 'entry', 1);
    await ctx.container.redis.hset(pendingKey('sound'), 'entry', 2);

    await expect(accrual.flush()).rejects.toThrow(/accrued batch broken:.* did not apply/);
    expect(applied).toEqual(['entry=2']);
    // Tried again by every flush, and still failing; what is pending of the other kind goes on.
    await ctx.container.redis.hset(pendingKey('sound'), 'entry', 3);
    await expect(accrual.flush()).rejects.toThrow(/accrued batch broken:/);
    expect(applied).toEqual(['entry=2', 'entry=3']);
    accrual.register('broken', async () => {});
    await accrual.flush();
  });

  it('is tried again only until one fails again in a flush: PostgreSQL is likely still away', async () => {
    const accrual = replica();
    let calls = 0;
    accrual.register('down', async () => {
      calls += 1;
      throw new Error('PostgreSQL away');
    });
    for (let batch = 1; batch <= 3; batch += 1) {
      await ctx.container.redis.hset(pendingKey('down'), 'entry', batch);
      await expect(accrual.flush()).rejects.toThrow();
    }
    calls = 0;
    await expect(accrual.flush()).rejects.toThrow(/accrued batch down:/);
    expect(calls).toBe(1);
    // Back: every failed batch applies in the next flush.
    const applied: string[] = [];
    accrual.register('down', recordingInto(applied));
    await accrual.flush();
    expect(applied.sort()).toEqual(['entry=1', 'entry=2', 'entry=3']);
  });

  // Waited for as a batch being applied, it held every replica's flush for 30 s.
  it('is tried again by the next flush of any replica, which does not wait for it', async () => {
    const [failing, other] = [replica(), replica()];
    const applied: string[] = [];
    failing.register('flaky', async () => {
      throw new Error('PostgreSQL away a moment');
    });
    other.register('flaky', recordingInto(applied));
    await ctx.container.redis.hset(pendingKey('flaky'), 'entry', 4);
    await expect(failing.flush()).rejects.toThrow();
    expect(applied).toEqual([]);

    await other.flush();
    expect(applied).toEqual(['entry=4']);
    // Applied once: the failing replica's next flush finds nothing left of it.
    await failing.flush();
    expect(applied).toEqual(['entry=4']);
  }, 10_000);
});
