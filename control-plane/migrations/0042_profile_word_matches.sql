-- The names a one-word profile search finds by its words, in one function: the names holding a word
-- that starts with the query, or, when there are none, those holding the terms nearest to it (a typo,
-- or two words run together). These were three CTEs of the search's statement, which PostgreSQL planned
-- for their values at every search (0.6-0.7 ms of the statement's 0.9-1.1 ms of planning), though the
-- nearest terms are needed only when no word starts with the query.
--
-- Here the names holding a word that starts with the query come from one statement planned once a
-- session (plan_cache_mode, for this function only), with the one plan that serves any app: the words'
-- index read in its order over the range of the prefix (sequential and bitmap scans switched off while
-- it is planned, so that no app's words are read whole and sorted). The words are in the C collation
-- and hold letters and digits only (0036), so the range from the prefix to the prefix followed by
-- U+10FFFF, the last code point, holds exactly the words that start with it. The nearest terms keep
-- the statements they had, planned for their values (the vocabulary's reads depend on how common the
-- query's trigrams are), now only when no word starts with the query: run by EXECUTE, with the
-- planner's defaults for the scans. The same names as the CTEs, in the same order.
--
-- The settings are the function's own and end with it. Its tables and functions are qualified: a
-- PL/pgSQL body is resolved when it runs, in the caller's search path (as svc_fold's, 0039).
create function svc_profile_word_matches(
  p_app_id text, p_mode text, p_q text, p_nearest int, p_words_read int
) returns setof bigint
  language plpgsql stable
  set plan_cache_mode = force_generic_plan
  set enable_seqscan = off
  set enable_bitmapscan = off
  set enable_indexscan = on
  set enable_indexonlyscan = on
  as $$
declare
  folded text := public.svc_fold(p_q);
  prefix text;
  found_pks bigint[];
  typo_pks bigint[];
  -- The names holding the terms of the app's names nearest to the query (migration 0037: its words,
  -- or its pairs of neighbouring words as "w1 w2"), each term tested once, however many names hold
  -- it. A term's trigrams are a run of its names' own, so each holder is at least as close as the term:
  -- no name is tested. The first holders in the terms' order, each name once (a name may hold several
  -- such terms). %1$s tells the kind of term, %2$s where its holders are (for format(): %% is %).
  nearest_terms constant text := $sql$
    select named.pk from (
      select distinct on (held.pk) held.pk, held.distance, held.term from (
        select t.pk, v.distance, v.term
        from (
          select v.term, $3 <<-> v.term as distance from public.profile_vocabulary v
          where v.app_id = $1 and v.mode = $2 and %1$s and $3 <%% v.term
          order by distance, v.term
        ) v
        cross join lateral (%2$s) t
        order by v.distance, v.term
        limit $5
      ) held
      order by held.pk, held.distance, held.term
    ) named
    order by named.distance, named.term, named.pk
    limit $4$sql$;
begin
  -- One word of two characters or more, whatever surrounds it ("@rodri ": pg_trgm reads the words
  -- alone). Several words (or one letter) are the search statement's to find.
  if folded !~ '^[^[:alnum:]]*[[:alnum:]]{2,}[^[:alnum:]]*$' then
    return;
  end if;
  prefix := substring(folded from '[[:alnum:]]+');
  -- The names holding the words that start with it, in the words' order, the word itself ahead of the
  -- longer ones; each name once (it may hold several such words: maria92 María) and a match (a
  -- threshold raised above 2/3 would refuse two-letter prefixes).
  select array_agg(p.pk) into found_pks from (
    select w.profile_pk as pk, min(w.word) as first from (
      select w.profile_pk, w.word from public.profile_words w
      where w.app_id = p_app_id and w.mode = p_mode and w.word >= prefix and w.word < prefix || chr(1114111)
      order by w.word
      limit p_words_read) w
    group by w.profile_pk
    order by first
    limit p_nearest) named
  join public.profiles p on p.pk = named.pk
  where word_similarity(folded, p.search_name) >= current_setting('pg_trgm.word_similarity_threshold')::real;
  if found_pks is not null then
    return query select unnest(found_pks);
    return;
  end if;
  perform set_config('enable_seqscan', 'on', true), set_config('enable_bitmapscan', 'on', true);
  -- When no word starts with it: the names holding the words nearest to it (a typo).
  execute 'select array_agg(pk) from (' || format(nearest_terms, $sql$strpos(v.term, ' ') = 0$sql$,
    $sql$select w.profile_pk as pk from public.profile_words w
         where w.app_id = $1 and w.mode = $2 and w.word = v.term$sql$) || ') typos'
    into typo_pks
    using p_app_id, p_mode, folded, p_nearest, p_words_read;
  return query select unnest(typo_pks);
  -- When those are fewer: the names holding the pairs of neighbouring words nearest to it (two words
  -- run together, "jeanpierre", maybe with a typo).
  if coalesce(cardinality(typo_pks), 0) < p_nearest then
    return query execute format(nearest_terms, $sql$strpos(v.term, ' ') > 0$sql$,
      $sql$select w.profile_pk as pk from public.profile_word_pairs w
           where w.app_id = $1 and w.mode = $2 and w.pair = v.term$sql$)
      using p_app_id, p_mode, folded, p_nearest, p_words_read;
  end if;
end $$;
