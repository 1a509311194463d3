import { randomUUID } from 'node:crypto';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pruningTaskName, taskLeaseKey } from '../src/maintenance.js';
import { batchClaimer, pendingKey } from '../src/platform/accrual.js';
import { createManualClock } from '../src/platform/clock.js';
import { createCustomer, startTestApp, type TestContext } from './support.js';

/**
 * The maintenance leases of the prunes under test, held while this file runs: the test stack's own
 * control plane, pruning by real time, would otherwise take this file's rows from the year 2000 between
 * an insert and its assertion.
 */
const PRUNES = [
  'usage flush claims',
  'ended live sessions',
  'monthly active users',
  'metered days',
  'dashboard sessions',
].map((rows) => taskLeaseKey(pruningTaskName(rows)));
const holder = randomUUID();

let ctx: TestContext;
beforeAll(async () => {
  // Long past: these prunes take every app's rows older than their retention, and no other test's rows
  // are older than this clock's (tests that keep such rows run on clocks ahead of real time).
  ctx = await startTestApp({ clock: createManualClock('2000-03-01T00:00:05Z') });
  for (const lease of PRUNES) {
    const deadline = Date.now() + 10_000;
    while ((await ctx.container.redis.set(lease, holder, 'PX', 120_000, 'NX')) !== 'OK') {
      if (Date.now() > deadline) throw new Error(`${lease} stayed held`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
});
afterAll(async () => {
  for (const lease of PRUNES)
    if ((await ctx.container.redis.get(lease)) === holder) await ctx.container.redis.del(lease);
  await ctx.close();
});

const DAY_MS = 86_400_000;
const count = (query: ReturnType<typeof sql.unsafe>) =>
  ctx.container.pool.oneFirst(
    sql.type(z.object({ count: z.number() }))`select count(*)::int as count from (${query}) rows`,
  );

describe('claims of accounts by applied usage batches', () => {
  it('go a day after they were made, unless their batch is still in Redis', async () => {
    const { account } = await createCustomer(ctx.container);
    const [old, recent, stuck] = [randomUUID(), randomUUID(), randomUUID()];
    const claimed = (batch: string, hoursAgo: number) =>
      ctx.container.pool.query(sql.unsafe`
        insert into usage_flushes (batch_id, account_id, flushed_at)
        values (${batch}, ${account.id}, now() - make_interval(hours => ${hoursAgo}))`);
    await claimed(old, 25);
    await claimed(recent, 23);
    await claimed(stuck, 25);
    // A batch that failed to apply for a day is still listed: its claims are what keep it from charging twice.
    await ctx.container.redis.hset(pendingKey('retention'), 'entry', 1);
    expect(await batchClaimer(ctx.container.redis)('retention', stuck)).toBe(1);
    try {
      await ctx.container.accrual.prune();
      const left = await ctx.container.pool.anyFirst(
        sql.type(z.object({ batch_id: z.string() }))`
          select batch_id from usage_flushes where account_id = ${account.id} order by flushed_at, batch_id`,
      );
      expect([...left].sort()).toEqual([recent, stuck].sort());
    } finally {
      await ctx.container.redis.del(`svc:accrued:retention:batch:${stuck}`);
      await ctx.container.redis.zrem('svc:accrued:batches', `retention:${stuck}`);
    }
  });
});

describe('ended live sessions', () => {
  it('go with their published quality 30 days after they ended; open ones stay', async () => {
    const { account, app } = await createCustomer(ctx.container);
    const now = ctx.clock.now().getTime();
    const prefix = `PA_${randomUUID().slice(0, 8)}`;
    const longAgo = (days: number) => sql.timestamp(new Date(now - days * DAY_MS));
    const quality = (sid: string, reportedDaysAgo: number) =>
      ctx.container.pool.query(sql.unsafe`
        insert into live_published_quality (participant_sid, quality, reported_at)
        values (${sid}, 'fhd', ${longAgo(reportedDaysAgo)})`);
    const session = async (sid: string, leftDaysAgo: number | null) => {
      // Seen until far ahead while open: no reconciliation closes it meanwhile (its room is no call).
      const lastSeen = leftDaysAgo === null ? sql.timestamp(new Date('2999-01-01')) : longAgo(40);
      await ctx.container.pool.query(sql.unsafe`
        insert into live_sessions (participant_sid, room, identity, app_id, account_id, mode, kind, publisher,
                                   declared_quality, joined_at, last_seen_at, left_at, billed_seconds)
        values (${sid}, ${prefix}, ${sid}, ${app.id}, ${account.id}, 'test', 'call', true, 'hd',
                ${longAgo(40)}, ${lastSeen}, ${leftDaysAgo === null ? null : longAgo(leftDaysAgo)},
                ${leftDaysAgo === null ? null : 60})`);
      // Reported as the session began: the session, not the report's age, decides when it goes.
      await quality(sid, 40);
    };
    const [ended, boundary, recent, open, orphaned, orphanedRecently] = [
      'ended',
      'boundary',
      'recent',
      'open',
      'orphaned',
      'orphaned_recently',
    ].map((n) => `${prefix}_${n}`);
    await session(ended!, 30.001);
    await session(boundary!, 30);
    await session(recent!, 29);
    await session(open!, null);
    // Qualities whose session never came go 30 days after their first report.
    await quality(orphaned!, 30.001);
    await quality(orphanedRecently!, 29);

    await ctx.container.live.pruneEndedSessions();
    const sids = (table: string) =>
      ctx.container.pool.anyFirst(
        sql.type(z.object({ participant_sid: z.string() }))`
          select participant_sid from ${sql.identifier([table])}
          where participant_sid like ${`${prefix}%`} order by participant_sid`,
      );
    expect(await sids('live_sessions')).toEqual([boundary, open, recent]);
    expect(await sids('live_published_quality')).toEqual([boundary, open, orphanedRecently, recent]);
    await ctx.container.pool.query(sql.unsafe`
      delete from live_published_quality where participant_sid like ${`${prefix}%`}`);
    await ctx.container.pool.query(sql.unsafe`
      delete from live_sessions where participant_sid like ${`${prefix}%`}`);
  });
});

describe('monthly active users and metered days', () => {
  it('keep this month and the last, and the last week', async () => {
    const { app } = await createCustomer(ctx.container);
    for (const month of ['2000-01-01', '2000-02-01', '2000-03-01'])
      await ctx.container.pool.query(sql.unsafe`
        insert into chat_monthly_active_users (app_id, mode, month, user_id, first_login_at)
        values (${app.id}, 'test', ${month}::date, 'ana', now())`);
    for (const day of ['2000-02-22', '2000-02-23', '2000-03-01'])
      await ctx.container.pool.query(sql.unsafe`
        insert into storage_metered_days (app_id, mode, day) values (${app.id}, 'test', ${day}::date)`);

    await ctx.container.chat.pruneMonthlyActiveUsers();
    await ctx.container.storage.pruneMeteredDays();
    const months = await ctx.container.pool.anyFirst(
      sql.type(z.object({ month: z.string() }))`
        select to_char(month, 'YYYY-MM-DD') as month from chat_monthly_active_users
        where app_id = ${app.id} order by month`,
    );
    expect(months).toEqual(['2000-02-01', '2000-03-01']);
    const days = await ctx.container.pool.anyFirst(
      sql.type(z.object({ day: z.string() }))`
        select to_char(day, 'YYYY-MM-DD') as day from storage_metered_days where app_id = ${app.id} order by day`,
    );
    expect(days).toEqual(['2000-02-23', '2000-03-01']);
  });
});

describe('dashboard invitations', () => {
  it('go a month after they expired', async () => {
    const { account } = await createCustomer(ctx.container);
    const invite = () => ctx.container.dashboard.inviteOwner(account.id, `${randomUUID()}@example.com`);
    await invite();
    ctx.clock.advance(1);
    await invite();
    const left = () => count(sql.unsafe`select 1 from dashboard_invites where account_id = ${account.id}`);
    try {
      // Invitations work three days: the first expired 30 days ago to the millisecond, the second 1 ms later.
      ctx.clock.advance((3 + 30) * DAY_MS - 1);
      await ctx.container.dashboard.pruneExpired();
      expect(await left()).toBe(2);
      ctx.clock.advance(1);
      await ctx.container.dashboard.pruneExpired();
      expect(await left()).toBe(1);
    } finally {
      ctx.clock.set('2000-03-01T00:00:05Z');
    }
  });
});
