-- Buzz search in one function whose statements are planned once a session, each to the one plan that
-- serves every app and every query.
--
-- The search was one statement planned for its values at every call (0.5-0.65 ms of planning), because
-- a plan made without them read whole apps: a generic plan takes an app to be of average size, and for
-- a small one a read of all its buzzes then sorted is cheaper than a walk in the listing index's order,
-- which for a million-buzz app means reading the million. Its choices, though, never needed the
-- values: which read to take (walk or word index) is decided as it runs, by the probe. So here each read
-- is a statement of its own with the only plan that is right for it, the others switched off while it is
-- planned, and that plan is kept for the session (plan_cache_mode, for this function only):
--   - the probe and the walk read the listing index in its order (no sequential or bitmap scan: no
--     read of a whole app to be sorted);
--   - the word index read takes the word index only (no index scan, no sequential scan; the app is
--     tested as (app_id || '') so that the listing index cannot be bitmap-scanned for it instead);
--   - the page's buzzes and authors come by their primary keys.
-- The same rows as the statement, in the same order; the query is folded once where the statement
-- folded it in each read. Twelve queries, one connection, 40 calls each, statement and function in
-- turns: 23.4 -> 12.6 ms a round in an app of 200,000 buzzes, 22.1 -> 12.0 ms in one of 1,000,000.
--
-- The settings are the function's own: each is restored when it returns, and set_config inside it
-- changes only those. Its search path is the migration's: a PL/pgSQL body is resolved when it runs, in
-- the caller's search path otherwise (svc_fold, 0039, names its schema instead).
create function svc_search_buzzes(
  p_app_id text, p_mode text, p_q text, p_limit int, p_walk_from int, p_probe int, p_walk int,
  p_candidates int
) returns table (pk bigint, id text, type text, text text, reactions int, comments int,
                 created_at timestamptz, author_pk bigint, author_id text, author_username text)
  language plpgsql stable
  set search_path from current
  set plan_cache_mode = force_generic_plan
  set enable_seqscan = off
  set enable_bitmapscan = off
  set enable_indexscan = on
  set enable_indexonlyscan = off
  as $$
#variable_conflict use_column
declare
  folded text := svc_fold(p_q);
  query tsquery := plainto_tsquery('simple', folded);
  -- The query's words as the word index keys them (migration 0028).
  words text[] := svc_words_by_app(p_app_id, p_mode, to_tsvector('simple', folded));
  -- How many of the newest buzzes (SEARCH_BUZZ_PROBE) match.
  probed bigint;
  -- The candidates: the newest matches, SEARCH_BUZZ_CANDIDATES at most.
  matched_pks bigint[];
  matched_at timestamptz[];
  matched_ids text[];
  matched_ranks real[];
begin
  -- A query without words matches no buzz (the word index would take it as found in every one).
  if cardinality(words) = 0 then
    return;
  end if;
  select count(*) into probed from (
    select b.search from buzzes b
    where b.app_id = p_app_id and b.mode = p_mode and b.deleted_at is null
    order by b.created_at desc, b.id desc
    limit p_probe) w
  where w.search @@ query;
  if probed >= p_walk_from then
    -- Common enough in the newest buzzes: walk them in order until the candidates are found.
    select array_agg(w.pk), array_agg(w.created_at), array_agg(w.id),
           array_agg(ts_rank(w.search, query))
      into matched_pks, matched_at, matched_ids, matched_ranks
    from (
      select w.pk, w.created_at, w.id, w.search from (
        select b.pk, b.created_at, b.id, b.search from buzzes b
        where b.app_id = p_app_id and b.mode = p_mode and b.deleted_at is null
        order by b.created_at desc, b.id desc
        limit p_walk) w
      where w.search @@ query
      order by w.created_at desc, w.id desc
      limit p_candidates) w;
  end if;
  if coalesce(cardinality(matched_pks), 0) < p_candidates then
    -- Rare words, or a walk that came short: the word index, which fetches every match.
    perform set_config('enable_bitmapscan', 'on', true),
            set_config('enable_indexscan', 'off', true);
    select array_agg(m.pk), array_agg(m.created_at), array_agg(m.id),
           array_agg(m.rank)
      into matched_pks, matched_at, matched_ids, matched_ranks
    from (
      select b.pk, b.created_at, b.id, ts_rank(b.search, query) as rank
      from buzzes b
      where svc_words_by_app(b.app_id, b.mode, b.search) @> words
        and (b.app_id || '') = p_app_id and b.mode = p_mode and b.search @@ query
        and b.deleted_at is null
      order by b.created_at desc, b.id desc
      limit p_candidates) m;
    perform set_config('enable_bitmapscan', 'off', true),
            set_config('enable_indexscan', 'on', true);
  end if;
  -- The best ranked of the candidates, joined to their authors only once the page is cut.
  return query
    select b.pk, b.id, b.type, b.text, b.reactions, b.comments, b.created_at, b.author_pk,
           a.user_id, a.username
    from (
      select * from unnest(matched_pks, matched_at, matched_ids, matched_ranks)
        as m (pk, created_at, id, rank)
      order by m.rank desc, m.created_at desc, m.id desc
      limit p_limit) best
    join buzzes b on b.pk = best.pk
    join profiles a on a.pk = b.author_pk
    order by best.rank desc, best.created_at desc, best.id desc;
end $$;
