import { describe, expect, it } from 'vitest';
import { formatUsd, parseUsd } from './money.js';

describe('money', () => {
  it('formats micro-dollars with six places', () => {
    expect(formatUsd(0)).toBe('0.000000');
    expect(formatUsd(1)).toBe('0.000001');
    expect(formatUsd(1_500)).toBe('0.001500');
    expect(formatUsd(12_345_678)).toBe('12.345678');
    expect(formatUsd(-2_000_000)).toBe('-2.000000');
  });

  it('refuses fractions of a micro-dollar', () => {
    expect(() => formatUsd(0.5)).toThrow(RangeError);
  });

  it('parses decimal USD without floating point drift', () => {
    expect(parseUsd('10')).toBe(10_000_000);
    expect(parseUsd('0.1')).toBe(100_000);
    expect(parseUsd('0.000001')).toBe(1);
    expect(parseUsd('19.99')).toBe(19_990_000);
    expect(parseUsd(' 3.5 ')).toBe(3_500_000);
  });

  it.each(['', '-1', '1.0000001', '1e3', 'ten', '1.', '.5'])('refuses "%s"', (text) => {
    expect(() => parseUsd(text)).toThrow(RangeError);
  });
});
