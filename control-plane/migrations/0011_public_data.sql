-- App users and public data I: user tokens, profiles, buzzes, reactions, comments, follows, search.
--
-- Everything is scoped to an app and a key mode (a test key sees the sandbox, a live key production).
-- An app user is the app's own user id, used as given (platform/identities.ts); a profile's public id
-- is that user id. Rows carry an internal bigint key so the large tables stay small.
-- In public, named with it below: the migrations may run with another schema first in the path.
create extension if not exists pg_trgm with schema public;
create extension if not exists unaccent with schema public;
-- Search indexes lead with the app and mode, so an app's search never reads another app's matches.
create extension if not exists btree_gin with schema public;
create extension if not exists btree_gist with schema public;

-- unaccent() is only stable (its dictionary could change); indexes need an immutable wrapper, and the
-- dictionary named explicitly so the function does not depend on the search path.
create function svc_fold(value text) returns text
  language sql immutable parallel safe strict
  return lower(public.unaccent('public.unaccent'::regdictionary, value));

-- The service's signing keys for user tokens (ES256). The newest key whose signs_from has come signs;
-- every key is published in the JWKS document until published_until, so tokens it signed verify
-- until they expire. The private key is sealed with SVC_SEALING_KEY.
create table user_token_keys (
  kid text primary key,
  public_jwk jsonb not null,
  private_key_sealed bytea not null,
  created_at timestamptz not null,
  signs_from timestamptz not null,
  -- Set when a newer key takes over: the key then stays published until its last token expires.
  retired_at timestamptz,
  published_until timestamptz
);

-- Revoking a user's tokens bumps the user's generation; a token carries the generation it was minted
-- in, and only the current one is accepted. No row: generation 0.
create table user_token_generations (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  user_id text not null,
  generation integer not null,
  revoked_at timestamptz not null,
  primary key (app_id, mode, user_id)
);

create table profiles (
  pk bigint generated always as identity primary key,
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  user_id text not null,
  username text not null,
  full_name text not null,
  category text not null,
  verified boolean not null default false,
  -- Kept by the writes that change them, in their transaction; a recount must always agree.
  followers integer not null default 0 check (followers >= 0),
  following integer not null default 0 check (following >= 0),
  buzzes integer not null default 0 check (buzzes >= 0),
  -- A fixture of the test mode's sandbox (seeded, not written by a caller).
  sandbox boolean not null default false,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  -- What search compares, folded once when written rather than on every row of every search.
  search_name text generated always as (svc_fold(username || ' ' || full_name)) stored,
  unique (app_id, mode, user_id)
);
create unique index profiles_username_idx on profiles (app_id, mode, lower(username));
-- Search by username and full name, with typos and prefixes: the nearest names first (trigram
-- word-similarity distance, walked in order by the GiST index). Signatures of 256 bytes rather than
-- 12 are far less lossy: a search of 100,000 names rechecks a third as many rows.
create index profiles_search_idx on profiles
  using gist (app_id, mode, search_name public.gist_trgm_ops (siglen = 256));

create table buzzes (
  pk bigint generated always as identity primary key,
  id text not null unique,
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  author_pk bigint not null references profiles (pk),
  type text not null,
  text text not null,
  reactions integer not null default 0 check (reactions >= 0),
  comments integer not null default 0 check (comments >= 0),
  created_at timestamptz not null,
  -- A soft delete: gone from every list, count and search at once; the row stays.
  deleted_at timestamptz,
  search tsvector generated always as (to_tsvector('simple', svc_fold(text))) stored
);
create index buzzes_listing_idx on buzzes (app_id, mode, created_at desc, id desc) where deleted_at is null;
create index buzzes_author_idx on buzzes (author_pk, created_at desc, id desc) where deleted_at is null;
create index buzzes_search_idx on buzzes using gin (app_id, mode, search) where deleted_at is null;

create table buzz_reactions (
  buzz_pk bigint not null references buzzes (pk),
  profile_pk bigint not null references profiles (pk),
  kind text not null,
  created_at timestamptz not null,
  primary key (buzz_pk, profile_pk)
);

create table buzz_comments (
  pk bigint generated always as identity primary key,
  id text not null unique,
  buzz_pk bigint not null references buzzes (pk),
  author_pk bigint not null references profiles (pk),
  text text not null,
  created_at timestamptz not null
);
create index buzz_comments_listing_idx on buzz_comments (buzz_pk, created_at desc, id desc);

create table follows (
  follower_pk bigint not null references profiles (pk),
  followee_pk bigint not null references profiles (pk),
  created_at timestamptz not null,
  primary key (follower_pk, followee_pk),
  check (follower_pk <> followee_pk)
);
create index follows_followee_idx on follows (followee_pk, created_at desc);

-- The test mode's sandbox of an app, seeded once on its first public-data call.
create table sandboxes (
  app_id text primary key references apps (id),
  seeded_at timestamptz not null
);
