import { describe, expect, it } from 'vitest';
import { SEARCH_BUZZ_CANDIDATES, SEARCH_BUZZ_PROBE, SEARCH_BUZZ_WALK } from './schema.js';
import { walkFrom } from './search-costs.js';

describe('walkFrom', () => {
  it('walks to rarer words the bigger the app', () => {
    // Where bench/public-data.ts's two-word queries found the two reads even: 12-19 of the probe's
    // 1,000 at 185,000 buzzes (below, the index was faster; above, the walk).
    expect(walkFrom(200_000)).toBe(13);
    expect(walkFrom(1_000_000)).toBe(6);
    expect(walkFrom(20_000)).toBe(29);
    const sizes = [1, 1_000, 10_000, 100_000, 1_000_000, 10_000_000];
    const from = sizes.map(walkFrom);
    expect(from).toEqual([...from].sort((a, b) => b - a));
  });

  it('never walks to words too rare to fill the candidates within the walk', () => {
    const withinReach = Math.ceil((SEARCH_BUZZ_CANDIDATES * SEARCH_BUZZ_PROBE) / SEARCH_BUZZ_WALK);
    expect(walkFrom(1_000_000_000)).toBe(withinReach);
    expect(walkFrom(0)).toBeGreaterThan(withinReach);
  });
});
