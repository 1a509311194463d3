-- Buzz search's word index keys each word by its app and mode: a word's posting list holds only that
-- app's buzzes of that mode.
--
-- The index was GIN over (app_id, mode, search) through btree_gin, which keeps the app and the mode
-- as entries of their own: every search read through the posting list of the app (a million buzzes)
-- and of the mode (every app's) beside the word's, 6 ms to find that a word is in no buzz of the app
-- and 11-14 ms for one in 75 (5 million buzzes in the table, 1 million in the app). Keyed together,
-- the same reads take 0.03 and 0.08 ms.
--
-- The planner reads no statistics from the expression of a partial index: without the extended
-- statistics (built by the ANALYZE below) it takes every word to be in 0.5% of all buzzes.
create function svc_words_by_app(app_id text, mode text, search tsvector) returns text[]
  language sql immutable parallel safe strict
  return array(select app_id || ' ' || mode || ' ' || word from unnest(tsvector_to_array(search)) word);

create index buzzes_words_idx on buzzes using gin (svc_words_by_app(app_id, mode, search))
  where deleted_at is null;
create statistics buzzes_words_by_app on (svc_words_by_app(app_id, mode, search)) from buzzes;
analyze buzzes;
-- The old index goes last: dropping it locks out reads until the commit, building the new one and
-- analyzing only writes.
drop index buzzes_search_idx;
