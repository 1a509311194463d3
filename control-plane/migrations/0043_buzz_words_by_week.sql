-- Buzz search's word index keys each word by its app, its mode and the week of the buzz, and search
-- reads it from the newest week back, stopping once it has its candidates.
--
-- Keyed by app and mode only (0028), a word's entries held the app's whole history: words too rare in
-- the newest buzzes to walk to, yet common over the years (two words of one language, in 0.5-2% of a
-- million buzzes), made search fetch every one of their thousands of matches to keep the newest 200, or
-- walk 20,000-30,000 buzzes to them: 10-16 ms of PostgreSQL, the slowest searches of the public-data
-- bench. Keyed by week, search reads the last week or two, then as many weeks as the pace of the
-- matches so far says it needs (at least as many again), so it fetches little more than it keeps,
-- whatever the app's size: 7.6 -> 2.4 ms on average for such queries (docs/decisions.md). Words the
-- probe did not see are read in all weeks at once, as before: a key is "app mode word week", and a
-- word's keys are one range of the index's entries, read by their prefix. The price: about 0.06 ms
-- more of PostgreSQL to write a buzz, and an index twice the size.
--
-- The keys are a tsvector's lexemes, so that one read takes several weeks: a tsquery of one AND of the
-- words per week, ORed (or of the words' prefixes, ANDed), which the GIN index answers in one scan.
--
-- Weeks are 7-day periods counted from 1970-01-01 in UTC: immutable, as an index expression must be.
create function svc_week(at timestamptz) returns int
  language sql immutable parallel safe strict
  return floor(extract(epoch from timezone('UTC', at)) / 604800)::int;

-- When a week begins: its buzzes are those from then until the next one begins.
create function svc_week_start(week int) returns timestamptz
  language sql immutable parallel safe strict
  return to_timestamp(week * 604800.0);

create function svc_words_by_week(app_id text, mode text, at timestamptz, search tsvector) returns tsvector
  language sql immutable parallel safe strict
  return array_to_tsvector(array(
    select app_id || ' ' || mode || ' ' || word || ' ' || svc_week(at)
    from unnest(tsvector_to_array(search)) word
    -- A lexeme holds 2,047 bytes at most (the week takes 10 digits at most): a longer key, of a word
    -- of some 2,000 bytes, would be cut, and no query (100 characters) can name that word anyway.
    where octet_length(word) <= 2034 - octet_length(app_id) - octet_length(mode)));

-- A key as tsquery input takes a lexeme: quoted, a quote doubled, a backslash escaped.
create function svc_quoted_key(key text) returns text
  language sql immutable parallel safe strict
  return '''' || replace(replace(key, '\', '\\'), '''', '''''') || '''';

-- A tsquery of the buzzes of (app, mode) holding every one of `words` in one of the weeks first..last:
-- one AND per week, ORed. Built in loops of simple expressions: as queries (string_agg over unnest), it
-- was planned at every call, 0.1 ms a read.
create function svc_words_in_weeks(app_id text, mode text, words text[], first int, last int)
  returns tsquery
  language plpgsql immutable parallel safe strict
  as $$
declare
  built text := '';
  week_query text;
  word text;
begin
  for week in first..last loop
    week_query := '';
    foreach word in array words loop
      week_query := week_query || case when week_query = '' then '' else ' & ' end
                    || svc_quoted_key(app_id || ' ' || mode || ' ' || word || ' ' || week);
    end loop;
    built := built || case when built = '' then '(' else ' | (' end || week_query || ')';
  end loop;
  return built::tsquery;
end $$;

-- The same in any week: each word's keys by their prefix, which GIN reads as one range of its entries
-- (a word never holds a space).
create function svc_words_ever(app_id text, mode text, words text[]) returns tsquery
  language plpgsql immutable parallel safe strict
  as $$
declare
  built text := '';
  word text;
begin
  foreach word in array words loop
    built := built || case when built = '' then '' else ' & ' end
             || svc_quoted_key(app_id || ' ' || mode || ' ' || word || ' ') || ':*';
  end loop;
  return built::tsquery;
end $$;

create index buzzes_words_by_week_idx on buzzes
  using gin (svc_words_by_week(app_id, mode, created_at, search)) with (gin_pending_list_limit = 256)
  where deleted_at is null;

drop function svc_search_buzzes(text, text, text, int, int, int, int, int);
-- The index keyed by app and mode goes with the function that read it, once the new one is built:
-- dropping it locks out reads until the commit (as in 0028).
drop index buzzes_words_idx;
drop statistics buzzes_words_by_app;
drop function svc_words_by_app(text, text, tsvector);

-- As 0041's, but for the word index read, which goes week by week, and the choice between it and the
-- walk, which the function now makes itself: the probe tells how common the words are in the newest
-- buzzes and how many buzzes a week brings, which decide what each read would cost (the costs are the
-- caller's, search-costs.ts).
create function svc_search_buzzes(
  p_app_id text, p_mode text, p_q text, p_limit int, p_probe int, p_walk int, p_candidates int,
  p_walked_buzz_us real, p_index_read_us real, p_index_match_us real
) returns table (pk bigint, id text, type text, text text, reactions int, comments int,
                 created_at timestamptz, author_pk bigint, author_id text, author_username text)
  language plpgsql stable
  set search_path from current
  set plan_cache_mode = force_generic_plan
  set enable_seqscan = off
  set enable_bitmapscan = off
  set enable_indexscan = on
  set enable_indexonlyscan = off
  -- A read takes a few milliseconds at most: starting parallel workers would cost more.
  set max_parallel_workers_per_gather = 0
  as $$
#variable_conflict use_column
declare
  folded text := svc_fold(p_q);
  query tsquery := plainto_tsquery('simple', folded);
  words text[] := tsvector_to_array(to_tsvector('simple', folded));
  -- How many of the newest buzzes (p_probe) there are and match, and the times of the newest and the
  -- last of them; the time of the app's oldest buzz.
  probed int;
  probed_matching int;
  probed_from timestamptz;
  newest timestamptz;
  oldest timestamptz;
  -- The share of the probe's buzzes that match, and how many buzzes the newest week holds at the
  -- probe's pace (fewer when the app is younger than a week).
  share real;
  weekly real;
  walking boolean;
  -- The next read takes `weeks` weeks back from `week`; `read_weeks` weeks have been read.
  week int;
  oldest_week int;
  weeks int;
  read_weeks int := 0;
  -- A read's keys, and the time its buzzes are older than. A read names most_keys keys at most: its
  -- tsquery's text grows with weeks × words (a word's keys in all the weeks left take one prefix).
  most_keys constant int := 256;
  keys tsquery;
  before timestamptz;
  -- The candidates: the newest matches, p_candidates at most.
  matched_pks bigint[] := '{}';
  matched_at timestamptz[] := '{}';
  matched_ids text[] := '{}';
  matched_ranks real[] := '{}';
  read_pks bigint[];
  read_at timestamptz[];
  read_ids text[];
  read_ranks real[];
begin
  -- A query without words matches no buzz (the word index would take it as found in every one).
  if cardinality(words) = 0 then
    return;
  end if;
  select count(*), count(*) filter (where w.search @@ query), min(w.created_at), max(w.created_at)
    into probed, probed_matching, probed_from, newest
  from (
    select b.search, b.created_at from buzzes b
    where b.app_id = p_app_id and b.mode = p_mode and b.deleted_at is null
    order by b.created_at desc, b.id desc
    limit p_probe) w;
  if probed = 0 then
    return;
  end if;
  oldest := probed_from;
  if probed = p_probe then
    select b.created_at into oldest from buzzes b
    where b.app_id = p_app_id and b.mode = p_mode and b.deleted_at is null
    order by b.created_at, b.id
    limit 1;
  end if;
  share := probed_matching::real / probed;
  weekly := probed * least(604800, greatest(extract(epoch from newest - oldest), 1))
            / greatest(extract(epoch from newest - probed_from), 1);
  -- Walk when the walk can reach the candidates and costs less than the index would: the walk reads
  -- candidates / share buzzes; the index fetches the candidates and, at worst, a week's more matches.
  -- (CASE: AND may test its terms in any order, and the share may be 0.)
  walking := case when probed_matching = 0 then false
                  else p_candidates / share <= p_walk
                       and p_walked_buzz_us * p_candidates / share
                           < p_index_read_us + p_index_match_us * (p_candidates + share * weekly) end;
  if walking then
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
    -- A walk that came short leaves the search to the word index, which finds them all.
    if coalesce(cardinality(matched_pks), 0) < p_candidates then
      matched_pks := '{}'; matched_at := '{}'; matched_ids := '{}'; matched_ranks := '{}';
    end if;
  end if;
  -- The word index, from the newest buzz's week back, until the candidates are found or the app's
  -- oldest week is read. The first read takes the newest buzz's week and the one before: at least the
  -- last 7 days, where the newest week alone may have just begun. Each next read takes as many weeks
  -- as the pace of the matches so far (by the second) says the rest needs, half again for luck, and
  -- at least as many as were read (a few reads reach any age). Words not in the probe, or in no week
  -- read, are taken for rare: all the weeks left at once, by the words' prefixes.
  week := svc_week(newest);
  oldest_week := svc_week(oldest);
  weeks := case when probed_matching = 0 then week - oldest_week + 1 else 2 end;
  perform set_config('enable_bitmapscan', 'on', true),
          set_config('enable_indexscan', 'off', true);
  while cardinality(matched_pks) < p_candidates loop
    weeks := least(weeks, week - oldest_week + 1);
    if week - weeks + 1 = oldest_week and weeks * cardinality(words) > most_keys then
      keys := svc_words_ever(p_app_id, p_mode, words);
    else
      weeks := least(weeks, greatest(most_keys / cardinality(words), 1));
      keys := svc_words_in_weeks(p_app_id, p_mode, words, week - weeks + 1, week);
    end if;
    before := svc_week_start(week + 1);
    select array_agg(m.pk), array_agg(m.created_at), array_agg(m.id), array_agg(m.rank)
      into read_pks, read_at, read_ids, read_ranks
    from (
      select b.pk, b.created_at, b.id, ts_rank(b.search, query) as rank
      from buzzes b
      where svc_words_by_week(b.app_id, b.mode, b.created_at, b.search) @@ keys
        and b.created_at < before
        and (b.app_id || '') = p_app_id and b.mode = p_mode and b.search @@ query
        and b.deleted_at is null
      order by b.created_at desc, b.id desc
      limit p_candidates - cardinality(matched_pks)) m;
    -- Each read's weeks are older than the last's: its matches come after those found.
    matched_pks := matched_pks || coalesce(read_pks, '{}');
    matched_at := matched_at || coalesce(read_at, '{}');
    matched_ids := matched_ids || coalesce(read_ids, '{}');
    matched_ranks := matched_ranks || coalesce(read_ranks, '{}');
    week := week - weeks;
    read_weeks := read_weeks + weeks;
    exit when week < oldest_week;
    -- The weeks read go back to the start of week + 1.
    weeks := case when cardinality(matched_pks) = 0 then week - oldest_week + 1
                  else greatest(read_weeks,
                                ceil(1.5 * (p_candidates - cardinality(matched_pks))
                                     * extract(epoch from newest - svc_week_start(week + 1))
                                     / cardinality(matched_pks) / 604800)::int) end;
  end loop;
  perform set_config('enable_bitmapscan', 'off', true),
          set_config('enable_indexscan', 'on', true);
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

-- The previous release's call, for the replicas still running it while an upgrade restarts them one
-- at a time (docs/operations.md): its choice of read (p_walk_from) is the function's own now, and its
-- costs are search-costs.ts's. A later migration drops it.
create function svc_search_buzzes(
  p_app_id text, p_mode text, p_q text, p_limit int, p_walk_from int, p_probe int, p_walk int,
  p_candidates int
) returns table (pk bigint, id text, type text, text text, reactions int, comments int,
                 created_at timestamptz, author_pk bigint, author_id text, author_username text)
  language sql stable
  set search_path from current
  as $$
    select * from svc_search_buzzes(p_app_id, p_mode, p_q, p_limit, p_probe, p_walk, p_candidates,
                                    0.28, 500, 1.0)
  $$;
