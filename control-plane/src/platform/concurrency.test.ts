import { describe, expect, it } from 'vitest';
import { mapAtMost } from './concurrency.js';

describe('mapAtMost', () => {
  it('runs at most the limit at once, starts the next as soon as one ends, and keeps the order', async () => {
    let running = 0;
    let most = 0;
    const started: number[] = [];
    const results = await mapAtMost([30, 1, 1, 1, 1, 1], 2, async (ms) => {
      started.push(ms);
      running += 1;
      most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, ms));
      running -= 1;
      return ms * 10;
    });
    expect(results).toEqual([300, 10, 10, 10, 10, 10]);
    expect(most).toBe(2);
    expect(started).toHaveLength(6);
  });

  it('does not let a slow item hold up the items after it', async () => {
    const ended: string[] = [];
    let release = () => {};
    const slow = new Promise<void>((resolve) => {
      release = resolve;
    });
    // The slow item ends only once c has: in batches of two, c would wait for it, and neither end.
    await mapAtMost(['slow', 'a', 'b', 'c'], 2, async (name) => {
      if (name === 'slow') await slow;
      ended.push(name);
      if (name === 'c') release();
    });
    expect(ended).toEqual(['a', 'b', 'c', 'slow']);
  });

  it('answers nothing for no items, and rejects when a task throws, starting no task after it', async () => {
    expect(await mapAtMost([], 4, async () => 1)).toEqual([]);
    const started: number[] = [];
    await expect(
      mapAtMost([1, 2, 3, 4, 5], 2, async (n) => {
        started.push(n);
        if (n === 2) throw new Error('two');
        await new Promise((resolve) => setTimeout(resolve, 5));
        return n;
      }),
    ).rejects.toThrow('two');
    await new Promise((resolve) => setTimeout(resolve, 30));
    // 1 was under way when 2 threw, and finished; nothing started after.
    expect(started).toEqual([1, 2]);
  });
});
