-- The sandbox is seeded per part (profiles and buzzes, moments, studio, About): a part an upgrade
-- adds is seeded into sandboxes made before it. The default stays while replicas of the previous
-- release, which insert without a part, may still run beside this one.
alter table sandboxes add column part text not null default 'social';
alter table sandboxes drop constraint sandboxes_pkey, add primary key (app_id, part);

-- An object uploaded with a user token is that user's: only they publish a moment from it.
alter table storage_objects add column owner_user_id text;

-- Public media: the video or photo of a moment or a studio asset and its thumbnail, served without a
-- key at /media/{id} and /media/{id}/thumbnail until what shows it is deleted.
create table media (
  id text primary key,
  app_id text not null references apps (id),
  account_id text not null references accounts (id),
  mode text not null check (mode in ('live', 'test')),
  kind text not null check (kind in ('video', 'photo')),
  -- The storage object whose bytes these are, which cannot be removed under it (storage answers
  -- 409); null for the sandbox's clips, and once the media is deleted.
  object_id text references storage_objects (id),
  storage_key text not null,
  content_type text not null,
  size_bytes bigint not null check (size_bytes > 0),
  width integer not null check (width > 0),
  height integer not null check (height > 0),
  duration_ms integer check (duration_ms > 0),
  thumbnail_key text not null,
  thumbnail_bytes integer not null check (thumbnail_bytes > 0),
  created_at timestamptz not null,
  deleted_at timestamptz,
  check (deleted_at is null or object_id is null)
);
create index media_object_idx on media (object_id) where object_id is not null;

create table moments (
  pk bigint generated always as identity primary key,
  id text not null unique,
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  author_pk bigint not null references profiles (pk),
  media_id text not null references media (id),
  caption text not null,
  like_count integer not null default 0 check (like_count >= 0),
  comment_count integer not null default 0 check (comment_count >= 0),
  view_count integer not null default 0 check (view_count >= 0),
  created_at timestamptz not null,
  deleted_at timestamptz
);
create index moments_listing_idx on moments (app_id, mode, created_at desc, id desc) where deleted_at is null;
create index moments_author_idx on moments (author_pk, created_at desc, id desc) where deleted_at is null;

create table moment_likes (
  moment_pk bigint not null references moments (pk),
  profile_pk bigint not null references profiles (pk),
  created_at timestamptz not null,
  primary key (moment_pk, profile_pk)
);

create table moment_comments (
  pk bigint generated always as identity primary key,
  id text not null unique,
  moment_pk bigint not null references moments (pk),
  author_pk bigint not null references profiles (pk),
  text text not null,
  created_at timestamptz not null
);
create index moment_comments_listing_idx on moment_comments (moment_pk, created_at desc, id desc);

-- Who viewed a moment on which UTC day: a viewer counts once per moment per day. Only today's rows
-- matter; older days are pruned.
create table moment_views (
  moment_pk bigint not null references moments (pk),
  day date not null,
  viewer text not null,
  primary key (moment_pk, day, viewer)
);
create index moment_views_day_idx on moment_views (day);

-- An app's studio: its persistent photos and videos, from an https URL or from its own storage.
create table studio_assets (
  pk bigint generated always as identity primary key,
  id text not null unique,
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  kind text not null check (kind in ('photo', 'video')),
  -- Media made from a storage object; null for an asset at an https URL of the app's own.
  media_id text references media (id),
  url text,
  thumbnail_url text,
  title text not null,
  width integer,
  height integer,
  tags text[] not null,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  deleted_at timestamptz,
  check ((media_id is null) = (url is not null))
);
create index studio_assets_listing_idx on studio_assets (app_id, mode, created_at desc, id desc)
  where deleted_at is null;
create index studio_assets_kind_idx on studio_assets (app_id, mode, kind, created_at desc, id desc)
  where deleted_at is null;
