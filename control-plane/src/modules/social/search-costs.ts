import { SEARCH_BUZZ_CANDIDATES, SEARCH_BUZZ_PROBE, SEARCH_BUZZ_WALK } from './schema.js';

/*
 * What finding a buzz search's candidates costs PostgreSQL, by way of reading: the walk tests the
 * newest buzzes one by one, about 0.28 µs each; the word index costs about 1.2 ms more, plus 1.4 µs for
 * each match it fetches. Fitted to 116 of bench/public-data.ts's two-word queries run both ways on two
 * cores, 185,000 buzzes (timed runs: EXPLAIN ANALYZE's timing doubles the walk's cost). Only their
 * ratios matter, since they choose.
 */
const WALKED_BUZZ_US = 0.28;
const INDEX_US = 1_200;
const INDEX_MATCH_US = 1.4;
/** The fewest of the probe's buzzes at which the walk's SEARCH_BUZZ_WALK can still fill the candidates. */
const WITHIN_REACH = Math.ceil((SEARCH_BUZZ_CANDIDATES * SEARCH_BUZZ_PROBE) / SEARCH_BUZZ_WALK);

/**
 * From how many of the probe's buzzes holding the words search walks to them rather than reading the
 * word index, in an app of `appBuzzes` buzzes. For a share d of buzzes holding them, the walk reads
 * SEARCH_BUZZ_CANDIDATES / d buzzes whatever the app's size, and the index fetches d × appBuzzes
 * matches: the bigger the app, the rarer the words it pays to walk to (1.3% of the buzzes at 200,000,
 * 0.6% at a million). Never fewer than the walk needs to fill the candidates within its reach.
 */
export function walkFrom(appBuzzes: number): number {
  // The share at which both cost the same: INDEX_MATCH_US·N·d² + INDEX_US·d − CANDIDATES·WALKED_BUZZ_US = 0.
  const perShare = INDEX_MATCH_US * Math.max(appBuzzes, 1);
  const share =
    (Math.sqrt(INDEX_US ** 2 + 4 * perShare * SEARCH_BUZZ_CANDIDATES * WALKED_BUZZ_US) - INDEX_US) /
    (2 * perShare);
  return Math.max(Math.ceil(share * SEARCH_BUZZ_PROBE), WITHIN_REACH);
}
