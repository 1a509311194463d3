-- The names a one-word profile search finds by its words, in functions: the names holding a word that
-- starts with the query, or, when there are none, those holding the terms nearest to it (a typo, or two
-- words run together). These were three CTEs of the search's statement, which PostgreSQL planned for
-- their values at every search (0.6-0.7 ms of the statement's 0.9-1.1 ms of planning), though the
-- nearest terms are needed only when no word starts with the query.
--
-- Here each read is a statement planned once a session (plan_cache_mode, for these functions only),
-- with the other ways of reading that could take a whole app switched off while it is planned:
--   - the names holding a word that starts with the query: the words' index read in its order over the
--     prefix's range (no sequential or bitmap scan: no app's words read whole and sorted). The words are
--     in the C collation and hold letters and digits only (0036), so the range from the prefix to the
--     prefix followed by U+10FFFF, the last code point (the database is UTF8), holds exactly the words
--     that start with it;
--   - only when there are none, the terms nearest to it (svc_nearest_word_holders, then
--     svc_nearest_pair_holders, made from one text): bitmap scans only, for which the vocabulary's
--     trigram index costs far less than a bitmap of all the app's terms, each then tested (the plan
--     was the trigram index's with the statistics as they are and with app_id declared 5,000 values,
--     as for many apps); then their holders term by term, in the terms' order, from the holders'
--     index, which stops at the holders needed.
-- The same names as the CTEs, in the same order (24 queries in three apps of 100,000, 20,000 and a
-- handful of profiles). On one connection, the names of a typo 1.2 -> 0.4-0.7 ms, of a prefix 0.4 ms.
--
-- The settings are the functions' own and end with them. Their search path is the migration's: a
-- PL/pgSQL body is resolved when it runs, in the caller's search path otherwise (svc_fold, 0039, names
-- its schema instead).

-- Whether a folded query is one word of two characters or more, whatever surrounds it ("@rodri ":
-- pg_trgm reads the words alone): such a query is found by its words, any other by walking the names.
-- One definition for the search statement and the functions below; inlined, so a constant query's
-- answer is known when the statement is planned.
create function svc_one_word(folded text) returns boolean
  language sql immutable parallel safe strict
  return folded ~ '^[^[:alnum:]]*[[:alnum:]]{2,}[^[:alnum:]]*$';

-- The names holding the terms of the app's names nearest to a one-word query (migration 0037), of one
-- kind: its words, or its pairs of neighbouring words as "w1 w2". Each term is tested once, however many
-- names hold it. A term's trigrams are a run of its names' own, so each holder is at least as close as
-- the term: no name is tested. The first holders in the terms' order (a term's in the order of their
-- key), each name once (a name may hold several such terms).
do $make$
declare
  kind record;
begin
  for kind in
    select * from (values
      ('svc_nearest_word_holders', $k$strpos(v.term, ' ') = 0$k$, 'profile_words', 'word'),
      ('svc_nearest_pair_holders', $k$strpos(v.term, ' ') > 0$k$, 'profile_word_pairs', 'pair')
    ) kinds (name, is_kind, holders, term)
  loop
    execute format($f$
      create function %1$I(
        p_app_id text, p_mode text, p_folded text, p_nearest int, p_words_read int
      ) returns setof bigint
        language plpgsql stable rows 50
        set search_path from current
        set plan_cache_mode = force_generic_plan
        set enable_seqscan = off
        set enable_bitmapscan = on
        set enable_indexscan = off
        set enable_indexonlyscan = off
        as $body$
      declare
        terms text[];
        distances real[];
        holders bigint[];
        held_pks bigint[] := '{}';
        held_distances real[] := '{}';
        held_terms text[] := '{}';
      begin
        select array_agg(v.term order by v.distance, v.term), array_agg(v.distance order by v.distance, v.term)
          into terms, distances
        from (
          select v.term, p_folded <<-> v.term as distance from profile_vocabulary v
          where v.app_id = p_app_id and v.mode = p_mode and %2$s and p_folded <%% v.term
        ) v;
        perform set_config('enable_bitmapscan', 'off', true), set_config('enable_indexscan', 'on', true),
                set_config('enable_indexonlyscan', 'on', true);
        for i in 1 .. coalesce(cardinality(terms), 0) loop
          exit when cardinality(held_pks) >= p_words_read;
          select array_agg(h.profile_pk order by h.profile_pk) into holders from (
            select h.profile_pk from %3$I h
            where h.app_id = p_app_id and h.mode = p_mode and h.%4$I = terms[i]
            order by h.profile_pk
            limit p_words_read - cardinality(held_pks)) h;
          if holders is not null then
            held_pks := held_pks || holders;
            held_distances := held_distances || array_fill(distances[i], array[cardinality(holders)]);
            held_terms := held_terms || array_fill(terms[i], array[cardinality(holders)]);
          end if;
        end loop;
        return query
        select named.pk from (
          select distinct on (held.pk) held.pk, held.distance, held.term
          from unnest(held_pks, held_distances, held_terms) held (pk, distance, term)
          order by held.pk, held.distance, held.term
        ) named
        order by named.distance, named.term, named.pk
        limit p_nearest;
      end $body$$f$, kind.name, kind.is_kind, kind.holders, kind.term);
  end loop;
end $make$;

create function svc_profile_word_matches(
  p_app_id text, p_mode text, p_q text, p_nearest int, p_words_read int
) returns setof bigint
  language plpgsql stable rows 50
  set search_path from current
  set plan_cache_mode = force_generic_plan
  set enable_seqscan = off
  set enable_bitmapscan = off
  set enable_indexscan = on
  set enable_indexonlyscan = on
  as $$
declare
  folded text := svc_fold(p_q);
  prefix text;
  found_pks bigint[];
  typo_pks bigint[];
begin
  -- Several words (or one letter) are the search statement's to find.
  if not svc_one_word(folded) then
    return;
  end if;
  prefix := substring(folded from '[[:alnum:]]+');
  -- The names holding the words that start with it, in the words' order, the word itself ahead of the
  -- longer ones; each name once (it may hold several such words: maria92 María) and a match (a
  -- threshold raised above 2/3 would refuse two-letter prefixes).
  select array_agg(p.pk) into found_pks from (
    select w.profile_pk as pk, min(w.word) as first from (
      select w.profile_pk, w.word from profile_words w
      where w.app_id = p_app_id and w.mode = p_mode and w.word >= prefix and w.word < prefix || chr(1114111)
      order by w.word
      limit p_words_read) w
    group by w.profile_pk
    order by first
    limit p_nearest) named
  join profiles p on p.pk = named.pk
  where word_similarity(folded, p.search_name) >= current_setting('pg_trgm.word_similarity_threshold')::real;
  if found_pks is not null then
    return query select unnest(found_pks);
    return;
  end if;
  -- When no word starts with it: the names holding the words nearest to it (a typo); when those are
  -- fewer, also those holding the pairs nearest to it (two words run together, "jeanpierre", maybe
  -- with a typo).
  select array_agg(pk) into typo_pks
  from svc_nearest_word_holders(p_app_id, p_mode, folded, p_nearest, p_words_read) pk;
  return query select unnest(typo_pks);
  if coalesce(cardinality(typo_pks), 0) < p_nearest then
    return query select svc_nearest_pair_holders(p_app_id, p_mode, folded, p_nearest, p_words_read);
  end if;
end $$;
