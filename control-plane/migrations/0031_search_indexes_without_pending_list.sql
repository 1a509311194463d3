-- Search's two GIN indexes take each new row's entries at once, not through a pending list.
--
-- With fastupdate (GIN's default), a new or renamed profile and a new buzz go to the index's pending
-- list, which is merged into the index only by (auto)vacuum or once it passes gin_pending_list_limit
-- (4 MB). Until then every search reads the whole list, whatever its app: 3,000 new profiles (200
-- pages) made a profile search that finds nothing take 4-6 ms instead of 0.2-0.7, and 3,200 new
-- buzzes (225 pages) added about 1 ms to a buzz search; a full list is twice that. So one app's
-- signups and posts slowed every app's search until the next vacuum.
--
-- Written at once, a buzz's words cost publishing somewhat more PostgreSQL time, within the noise of
-- its rate (bench/public-data.ts: 0.36 and 0.37 of floor (a) each way); profiles change far less
-- often than they are searched.
--
-- The lists already pending are merged first, beside reads and writes: the ALTERs lock each index
-- (and so every query of its table) until the commit, which then follows at once. What was added
-- in between is merged after them, a moment's work.
select gin_clean_pending_list('profiles_search_match_idx'::regclass);
select gin_clean_pending_list('buzzes_words_idx'::regclass);
alter index profiles_search_match_idx set (fastupdate = off);
alter index buzzes_words_idx set (fastupdate = off);
select gin_clean_pending_list('profiles_search_match_idx'::regclass);
select gin_clean_pending_list('buzzes_words_idx'::regclass);
