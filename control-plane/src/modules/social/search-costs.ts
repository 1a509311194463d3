/*
 * What finding a buzz search's candidates costs PostgreSQL, by way of reading, for svc_search_buzzes
 * (migration 0043) to choose between its two reads as it runs: the walk tests the newest buzzes one by
 * one; the word index costs a fixed part, plus each match it fetches (the candidates, and at worst a
 * week's more). Only their ratios matter, since they choose. Fitted to bench/public-data.ts's queries in
 * an app of 1,000,000 buzzes, each read both ways (timed runs, two cores): the walk of 30,000 buzzes to
 * two words took 8.8 ms above the probe; the index took 1.1 ms for a few hundred matches, 3.6 ms for
 * one common word's 3,500.
 */
export const SEARCH_COSTS = {
  walkedBuzzUs: 0.28,
  indexReadUs: 500,
  indexMatchUs: 1.0,
} as const;
