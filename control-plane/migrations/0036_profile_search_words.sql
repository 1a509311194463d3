-- Profile search finds the names that hold a word starting with the query (search as you type: "rodri",
-- "user0421") from a table of the names' words, in order, instead of walking the nearest names.
--
-- Such a query is close to thousands of names (every "rodriguez") and equal to none, and the GiST
-- index's page signatures are saturated with usernames' trigrams, so its walk to the nearest read most
-- of the app's index before it could return one: 26 ms for "rodri" and 117 ms for "user" among 100,000
-- profiles. A name holding a word that starts with a one-word query of n characters, n >= 2, is n/(n+1)
-- close to it (less when the query repeats a trigram, alike for all such names), and only a name
-- holding the query as a whole word is closer (bar contrived ones: "rodrodri" for "rodri"); those sort
-- first among the words. So when 50 such names are found, search ranks those and does not walk
-- (modules/social/store.ts).
--
-- The words are what pg_trgm takes for words (runs of letters and digits in the database's ctype) of
-- the folded name, kept by a trigger with the profile. In the C collation, so that a prefix is a range
-- of the index. No foreign key: profiles are never deleted, and a word of a name that is gone would
-- only find nothing to join; the key's check of every row would make the fill below lock and dirty
-- every profile.
--
-- Profiles are locked against writes first, so that none is written between the fill and the trigger;
-- sign-ups, renames, follows and publishes (which count on the profile) wait for this migration:
-- about 15 s for a million profiles on two cores. The primary key is built once the words are in.
lock table profiles in share row exclusive mode;

create table profile_words (
  app_id text not null,
  mode text not null,
  word text collate "C" not null,
  profile_pk bigint not null
);

-- The words of a folded name, each once.
create function svc_name_words(name text) returns setof text language sql immutable strict parallel safe
as $$ select distinct word from regexp_split_to_table(name, '[^[:alnum:]]+') word where word <> '' $$;

insert into profile_words (app_id, mode, word, profile_pk)
select p.app_id, p.mode, svc_name_words(p.search_name), p.pk from profiles p;
alter table profile_words add primary key (app_id, mode, word, profile_pk);
create index profile_words_profile_idx on profile_words (profile_pk);
analyze profile_words;

create function svc_profile_words() returns trigger language plpgsql as $$
begin
  if tg_op = 'UPDATE' then
    if new.search_name is not distinct from old.search_name then
      return null;
    end if;
    delete from profile_words where profile_pk = new.pk;
  end if;
  insert into profile_words (app_id, mode, word, profile_pk)
  select new.app_id, new.mode, svc_name_words(new.search_name), new.pk;
  return null;
end $$;

create trigger profiles_words after insert or update of username, full_name on profiles
  for each row execute function svc_profile_words();

-- search_name's statistics go back to the default 100 values: migration 0029 raised them to 250 so that
-- the planner would not take a common first name for a rare one and sort its thousands of matches, and
-- the words above now find such a name without walking or sorting. Each search's planning tries the
-- query on these values, for every branch that matches names: 1.2 ms a search at 100, 2.0 ms at 250
-- (100,000 profiles), with no slower execution of names, typos, prefixes or two words.
alter table profiles alter column search_name set statistics -1;
analyze profiles;
