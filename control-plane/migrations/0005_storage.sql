-- Storage objects: one row per upload, from the reservation (pending) to ready; removing an object
-- deletes its bytes and its row.
create table storage_objects (
  id text primary key,
  app_id text not null references apps (id),
  account_id text not null references accounts (id),
  mode text not null check (mode in ('live', 'test')),
  name text not null,
  content_type text not null,
  declared_size bigint not null check (declared_size > 0),
  -- The real size, read from MinIO when the upload is completed.
  size_bytes bigint check (size_bytes >= 0),
  metadata jsonb not null,
  status text not null check (status in ('pending', 'ready')),
  storage_key text not null unique,
  created_at timestamptz not null,
  completed_at timestamptz,
  check ((status = 'ready') = (size_bytes is not null and completed_at is not null))
);
create index storage_objects_listing_idx on storage_objects (app_id, mode, created_at desc, id desc);
create index storage_objects_expiry_idx on storage_objects (mode, status, created_at);

-- The days whose stored bytes were metered, so each app and mode is metered once a day.
create table storage_metered_days (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  day date not null,
  primary key (app_id, mode, day)
);
