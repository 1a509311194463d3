import { describe, expect, it } from 'vitest';
import { splitCharge, takingTurns } from './charge-turns.js';

const sum = (parts: number[]) => parts.reduce((total, part) => total + part, 0);

describe('splitCharge', () => {
  it('gives what was left of the free allowance to the first calls and the full cost to the rest', () => {
    expect(splitCharge(3 * 10, 5, 10)).toEqual([0, 0, 10, 10, 10]);
    expect(splitCharge(0, 4, 10)).toEqual([0, 0, 0, 0]);
    expect(splitCharge(40, 4, 10)).toEqual([10, 10, 10, 10]);
  });

  it('takes a call priced in fractions of a micro-dollar as paying only for what was charged', () => {
    // 3 micro-dollars pay for 9 calls at a third each: the tenth, first in line, was free.
    expect(splitCharge(3, 10, 1 / 3)).toEqual([0, 0, 0, 1, 0, 0, 1, 0, 0, 1]);
  });

  it('adds up to what was charged when a unit is priced in fractions of a micro-dollar', () => {
    for (const [total, calls, full] of [
      [7, 3, 3],
      [1, 8, 0],
      [999, 16, 70],
      [5, 5, 1],
      [3, 10, 1 / 3],
    ] as const) {
      const parts = splitCharge(total, calls, full);
      expect(parts).toHaveLength(calls);
      expect(sum(parts)).toBe(total);
      expect(parts.every((part) => part >= 0)).toBe(true);
    }
  });
});

describe('takingTurns', () => {
  /** Turns recorded as the calls they took; each ends when the test says. */
  function recorder(lanes: number, most = 64) {
    const turns: { calls: string[]; end: () => void }[] = [];
    const take = takingTurns<{ name: string; reject(error: unknown): void }>(
      (calls) =>
        new Promise<void>((end) => {
          turns.push({ calls: calls.map((call) => call.name), end });
        }),
      most,
      lanes,
    );
    const call = (key: string, name: string) => take(key, { name, reject: () => {} });
    return { turns, call };
  }
  const settled = () => new Promise((resolve) => setImmediate(resolve));

  it('runs a call at once while fewer than `lanes` turns of its key run; the others make the next turn', async () => {
    const { turns, call } = recorder(2);
    call('k', 'a');
    call('k', 'b');
    call('k', 'c');
    call('k', 'd');
    call('other', 'x');
    expect(turns.map((turn) => turn.calls)).toEqual([['a'], ['b'], ['x']]);
    turns[1]!.end();
    await settled();
    // The lane that ended takes every call waiting for its key.
    expect(turns.map((turn) => turn.calls)).toEqual([['a'], ['b'], ['x'], ['c', 'd']]);
    call('k', 'e');
    expect(turns).toHaveLength(4);
    turns[0]!.end();
    await settled();
    expect(turns.map((turn) => turn.calls).at(-1)).toEqual(['e']);
  });

  it('takes one turn at a time with one lane, at most `most` calls each, and frees the key after its last', async () => {
    const { turns, call } = recorder(1, 2);
    for (const name of ['a', 'b', 'c', 'd']) call('k', name);
    expect(turns.map((turn) => turn.calls)).toEqual([['a']]);
    turns[0]!.end();
    await settled();
    expect(turns.map((turn) => turn.calls)).toEqual([['a'], ['b', 'c']]);
    turns[1]!.end();
    await settled();
    turns[2]!.end();
    await settled();
    expect(turns.map((turn) => turn.calls)).toEqual([['a'], ['b', 'c'], ['d']]);
    // Nothing runs or waits for the key now: a new call starts a turn of its own at once.
    call('k', 'e');
    expect(turns.map((turn) => turn.calls).at(-1)).toEqual(['e']);
  });
});
