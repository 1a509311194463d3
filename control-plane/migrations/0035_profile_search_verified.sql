-- Profile search ranks verified profiles ahead of others as close, but it ranked only the nearest
-- names: among thousands of equally close ones (a common first name) a verified profile showed only by
-- chance. Search now takes the nearest verified profiles as well, from this index when they are few
-- (the planner walks the GiST index for them, testing verified, when most profiles are). So it can
-- take fewer nearest names: 50, a page, instead of 200 (social/schema.ts).
--
-- No pending list, as the other profile index (migration 0031): a profile changes far less often
-- than it is searched.
create index profiles_search_verified_idx on profiles
  using gin (app_id, mode, search_name public.gin_trgm_ops) with (fastupdate = off) where verified;
