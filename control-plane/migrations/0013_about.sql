-- About content: a profile's sections (one per kind: services, catalog, faqs) and its items of each
-- kind, kept by the profile's owner and read by the app's server. Each list (the sections; the
-- items of one kind) has dense positions 0..n-1 in display order: a profile's About writes lock its
-- row `for no key update` first, so positions and the per-kind limit hold under concurrent writes.
-- The position constraints are checked at the commit, since a delete or a reorder moves several rows
-- in one statement. Items outlive their section: deleting it unlists them until one is back.

create table about_sections (
  id text primary key,
  profile_pk bigint not null references profiles (pk) on delete cascade,
  kind text not null check (kind in ('services', 'catalog', 'faqs')),
  position integer not null check (position >= 0),
  status text not null check (status in ('published', 'draft')),
  created_at timestamptz not null,
  updated_at timestamptz not null,
  unique (profile_pk, kind),
  -- Also the listing's index.
  constraint about_sections_position_key unique (profile_pk, position) deferrable initially deferred
);

-- An item's fields are the API's, by name, in one object: display content that no query filters or
-- sorts by, validated by the API's schema of its kind when written and again when read.
create table about_items (
  id text primary key,
  profile_pk bigint not null references profiles (pk) on delete cascade,
  kind text not null check (kind in ('services', 'catalog', 'faqs')),
  position integer not null check (position >= 0),
  fields jsonb not null check (jsonb_typeof(fields) = 'object'),
  created_at timestamptz not null,
  updated_at timestamptz not null,
  -- Also the listing's index: a profile's items of a kind in display order.
  constraint about_items_position_key unique (profile_pk, kind, position) deferrable initially deferred
);
