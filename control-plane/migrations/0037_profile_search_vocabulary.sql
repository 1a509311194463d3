-- Profile search finds the names close to a one-word query from the names' words, never by searching all
-- of the names (modules/social/store.ts).
--
-- A one-word query that starts no word (a typo, "lukasiewcz") is close to the names holding the word
-- it misspells, thousands of them for a common name, or to none. Found from the names, the GIN index
-- rechecked the ~5,000 names sharing most of its trigrams, or the GiST walk read most of its index, to
-- find them or to find that there were none: 20-45 ms among 100,000 profiles, growing with the app.
-- Here each word is once per app and mode, so the GIN index below rechecks a word once, however many
-- names hold it; the names come from profile_words by the words found.
--
-- A one-word query that runs two neighbouring words of a name together ("jeanpierre", "garciamaria",
-- "marianne" for Anne Marie) may be close to the name though to neither word: the walk found such
-- names, and so do the pairs below, which are terms here too. A pair is kept as its two words ("anne
-- marie"), whose trigrams are a run of the name's own: the query is as close to it as to that run of
-- the name, in any order of the words and with typos.
--
-- A term stays when the last name holding it goes (a rename): it then finds no name. The trigger adds a
-- name's new terms in their order, so that two profiles written at once by users wait for each other's
-- new terms in one order (an app's sandbox, the one writer of many profiles in a statement, is seeded
-- before its users write).
--
-- Profiles are locked against writes first, so that none is written between the fills and the trigger;
-- sign-ups, renames, follows and publishes wait for this migration (15 s for 420,000 profiles on two
-- cores).
lock table profiles in share row exclusive mode;

-- Each two neighbouring words of a profile's folded username, and of its folded full name, as "w1 w2"; a
-- pair may come twice ("ana ana ana"). Not the username's last word with the full name's first: no two
-- words a user runs together. In plpgsql: as SQL, a set-returning function, a profile's write cost a
-- fifth more.
create function svc_profile_pairs(username text, full_name text) returns text[] language plpgsql
immutable strict parallel safe
as $$
declare
  pairs text[] := '{}';
  words text[];
  name text;
begin
  foreach name in array array[username, full_name] loop
    words := regexp_split_to_array(svc_fold(name), '[^[:alnum:]]+');
    for i in 1 .. cardinality(words) - 1 loop
      if words[i] <> '' and words[i + 1] <> '' then
        pairs := pairs || (words[i] || ' ' || words[i + 1]);
      end if;
    end loop;
  end loop;
  return pairs;
end $$;

-- As profile_words (migration 0036): no foreign key, the keys built once the rows are in.
create table profile_word_pairs (
  app_id text not null,
  mode text not null,
  pair text collate "C" not null,
  profile_pk bigint not null
);
insert into profile_word_pairs (app_id, mode, pair, profile_pk)
select distinct p.app_id, p.mode, unnest(svc_profile_pairs(p.username, p.full_name)), p.pk from profiles p;
alter table profile_word_pairs add primary key (app_id, mode, pair, profile_pk);
create index profile_word_pairs_profile_idx on profile_word_pairs (profile_pk);
analyze profile_word_pairs;

create table profile_vocabulary (
  app_id text not null,
  mode text not null,
  term text collate "C" not null
);
insert into profile_vocabulary (app_id, mode, term)
select app_id, mode, word from profile_words
union
select app_id, mode, pair from profile_word_pairs;
alter table profile_vocabulary add primary key (app_id, mode, term);
-- Words and pairs apart: a typo of a common word is looked up among the words, whose number the
-- language bounds, and only a query no word is near among the pairs, of which an app may have about
-- one a name. Without a pending list, as the other search indexes (migration 0031): a search never
-- reads one.
create index profile_vocabulary_words_idx on profile_vocabulary
  using gin (app_id, mode, term public.gin_trgm_ops) with (fastupdate = off) where strpos(term, ' ') = 0;
create index profile_vocabulary_pairs_idx on profile_vocabulary
  using gin (app_id, mode, term public.gin_trgm_ops) with (fastupdate = off) where strpos(term, ' ') > 0;
-- No statistics of the terms: planning a search tested the query on each value kept (0.1 ms a search),
-- and the index is the one way to the terms whatever their number.
alter table profile_vocabulary alter column term set statistics 0;
analyze profile_vocabulary;

-- A name's words and pairs made once, for the three tables: a profile written costs PostgreSQL about
-- 0.5 ms here, 0.3 ms before (20,000 inserted in one statement).
create or replace function svc_profile_words() returns trigger language plpgsql as $$
declare
  words text[];
  pairs text[];
begin
  if tg_op = 'UPDATE' then
    if new.search_name is not distinct from old.search_name then
      return null;
    end if;
    delete from profile_words where profile_pk = new.pk;
    delete from profile_word_pairs where profile_pk = new.pk;
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
  return null;
end $$;
