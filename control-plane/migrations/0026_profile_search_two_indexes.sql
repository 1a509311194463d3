-- Profile search with an index for each kind of query, so that the planner picks per query.
--
-- One GiST index did both: it tested the match and walked the nearest names in order. On 100,000
-- profiles its pages' trigram signatures are saturated (every username adds trigrams of its own), so
-- for a query that matches few names, or none, it read most of the index before it could tell: 30 to
-- 80 ms for a typo, a word that is nobody's name, or a name with two words.
--   - The GIN index finds the matches of such a query from their trigrams' posting lists: under 1 ms
--     for none, a few ms for hundreds.
--   - The GiST index still walks the nearest names first, for a query that matches thousands (a
--     common first name), where ranking every match from the GIN index would read thousands of rows.
-- The GiST index is on the same text spelled as another expression, (search_name || ''): on
-- search_name itself, the planner also used it to test the match, which it costs far below the GIN
-- index (it cannot see the saturation), and was back to the slow walk. Spelled apart, the match is
-- tested by the GIN index only, and the nearest-first walk is ordered by the GiST index only; the
-- planner chooses between them from the column's statistics of how many names match. Its signatures
-- are 1,024 bytes, not 256: a walk for a partial username (user0421) or a four-letter prefix then
-- reads a quarter as much (32 → 8 ms and 27 → 5 ms on 100,000 profiles; a common name 4.4 ms either
-- way), for an index a fifth larger.
-- The old index goes last: dropping it locks out reads until the commit, building the new ones only
-- writes.
create index profiles_search_match_idx on profiles
  using gin (app_id, mode, search_name public.gin_trgm_ops);
create index profiles_search_nearest_idx on profiles
  using gist (app_id, mode, (search_name || '') public.gist_trgm_ops (siglen = 1024));
drop index profiles_search_idx;
