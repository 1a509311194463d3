import { describe, expect, it } from 'vitest';
import { splitCharge } from './charge-turns.js';

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
