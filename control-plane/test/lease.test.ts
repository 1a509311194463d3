import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withLease } from '../src/platform/lease.js';
import { startTestApp, type TestContext } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a lease', () => {
  it('keeps a task to one runner for as long as it runs, even past the lease time', async () => {
    const { redis } = ctx.container;
    const name = `test-${Date.now()}`;
    let running = 0;
    let most = 0;
    const task = async () => {
      running += 1;
      most = Math.max(most, running);
      await sleep(900);
      running -= 1;
      return 'done';
    };
    const first = withLease(redis, name, 300, task);
    // Other replicas try all along the first one's run, long after its 300 ms lease time.
    const others = [];
    for (let i = 0; i < 8; i += 1) {
      await sleep(100);
      others.push(await withLease(redis, name, 300, task));
    }
    expect(await first).toEqual({ ran: true, result: 'done' });
    expect(others).toEqual(Array(8).fill({ ran: false }));
    expect(most).toBe(1);
    // Given back at the end: the next one runs at once.
    expect(await withLease(redis, name, 300, async () => 'next')).toEqual({ ran: true, result: 'next' });
  });
});
