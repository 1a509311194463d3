-- Search's two GIN indexes keep no long pending list: the profile index none, the buzz index a short
-- one.
--
-- With fastupdate (GIN's default), a new or renamed profile and a new buzz go to the index's pending
-- list, which is merged into the index only by (auto)vacuum or once it passes gin_pending_list_limit
-- (4 MB). Until then every search reads the whole list, whatever its app: 3,000 new profiles (200
-- pages) made a profile search that finds nothing take 4-6 ms instead of 0.2-0.7, and 3,200 new
-- buzzes (225 pages) added about 1 ms to a buzz search; a full list is twice that. So one app's
-- signups and posts slowed every app's search until the next vacuum.
--   - Profiles change far less often than they are searched: their entries go in at once
--     (fastupdate off), about 0.2-0.3 ms more a profile written.
--   - Buzzes are written as often as searched, and writing a buzz's words at once cost publishing
--     0.15-0.25 ms more PostgreSQL time than a list of at most 256 kB (32 pages, read by a search in
--     about 0.15 ms), merged by the publish that fills it.
--
-- The lists already pending are merged first, beside reads and writes: the ALTERs lock each index
-- (and so every query of its table) until the commit, which then follows at once. What was added
-- in between is merged after them, a moment's work.
select gin_clean_pending_list('profiles_search_match_idx'::regclass);
select gin_clean_pending_list('buzzes_words_idx'::regclass);
alter index profiles_search_match_idx set (fastupdate = off);
alter index buzzes_words_idx set (gin_pending_list_limit = 256);
select gin_clean_pending_list('profiles_search_match_idx'::regclass);
select gin_clean_pending_list('buzzes_words_idx'::regclass);
