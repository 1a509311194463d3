-- Search terms no name holds any more leave the vocabulary (0037), which otherwise grew with every
-- rename for good: a typo's lookup read them, and they found no name.
--
-- A rename puts the terms its name no longer holds in profile_vocabulary_dropped; a background sweep
-- (modules/social/store.ts pruneVocabulary) deletes those that no name holds, with the profiles' word
-- tables locked against writes, briefly, so that no name can be taking a term as it goes.
--
-- A rename costs PostgreSQL about a tenth more (0.9-1.2 ms against 0.8-0.9 ms, renames of 30,000
-- profiles); a new profile, nothing more. The sweep's batch of 1,000 terms takes about 35 ms.
--
-- The terms left over by renames before this migration go now, with the profiles locked against writes
-- meanwhile: an anti-join of the vocabulary, 1.0 s for 100,000 profiles on two cores.
lock table profiles in share row exclusive mode;

create table profile_vocabulary_dropped (
  app_id text not null,
  mode text not null,
  term text collate "C" not null,
  primary key (app_id, mode, term)
);

delete from profile_vocabulary v
where not exists (
    select from profile_words w where w.app_id = v.app_id and w.mode = v.mode and w.word = v.term
  )
  and not exists (
    select from profile_word_pairs w where w.app_id = v.app_id and w.mode = v.mode and w.pair = v.term
  );

create or replace function svc_profile_words() returns trigger language plpgsql as $$
declare
  words text[];
  pairs text[];
  gone text[] := '{}';
begin
  if tg_op = 'UPDATE' then
    if new.search_name is not distinct from old.search_name then
      return null;
    end if;
    with words_gone as (
      delete from profile_words where profile_pk = new.pk returning word
    ), pairs_gone as (
      delete from profile_word_pairs where profile_pk = new.pk returning pair
    )
    select array(select word from words_gone union select pair from pairs_gone) into gone;
  end if;
  words := array(select svc_name_words(new.search_name));
  pairs := svc_profile_pairs(new.username, new.full_name);
  insert into profile_words (app_id, mode, word, profile_pk)
  select new.app_id, new.mode, word, new.pk from unnest(words) word;
  insert into profile_word_pairs (app_id, mode, pair, profile_pk)
  select distinct new.app_id, new.mode, pair, new.pk from unnest(pairs) pair;
  insert into profile_vocabulary (app_id, mode, term)
  select distinct new.app_id, new.mode, term collate "C" from unnest(words || pairs) term order by 3
  on conflict do nothing;
  -- The terms a renamed name let go, for the sweep to look at: other names may still hold them.
  if cardinality(gone) > 0 then
    insert into profile_vocabulary_dropped (app_id, mode, term)
    select distinct new.app_id, new.mode, term collate "C" from unnest(gone) term
    where term <> all (words || pairs) order by 3
    on conflict do nothing;
  end if;
  return null;
end $$;
