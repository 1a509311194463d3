-- Webhooks: an app's endpoints, the events its changes emit (a transactional outbox: an event is
-- inserted in the transaction of the change that caused it), one delivery per event and endpoint,
-- and every attempt of each delivery.

create table webhook_endpoints (
  id text primary key,
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  url text not null,
  description text not null default '',
  event_types text[] not null check (cardinality(event_types) > 0),
  -- For the profile events: the profiles the endpoint subscribes to; null means every profile.
  profile_ids text[],
  enabled boolean not null,
  -- Why the service disabled it ('failing'); null when enabled or disabled by the app.
  disabled_reason text,
  -- The signing secret sealed with AES-256-GCM under SVC_SEALING_KEY (iv | tag | ciphertext,
  -- the endpoint id as associated data): only the signer opens it.
  secret_sealed bytea not null,
  secret_hint text not null,
  -- Since when every attempt to this endpoint has failed; null after any success.
  failing_since timestamptz,
  created_at timestamptz not null,
  updated_at timestamptz not null
);
create index webhook_endpoints_app_idx on webhook_endpoints (app_id, mode, created_at desc, id desc);

create table webhook_events (
  id text primary key,
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  type text not null,
  profile_id text,
  -- The exact bytes every attempt sends (and signs): retries and redeliveries are identical.
  body text not null,
  created_at timestamptz not null
);
create index webhook_events_created_at_idx on webhook_events (created_at);

create table webhook_deliveries (
  id text primary key,
  event_id text not null references webhook_events (id) on delete cascade,
  endpoint_id text not null references webhook_endpoints (id) on delete cascade,
  status text not null check (status in ('pending', 'succeeded', 'failed')),
  -- Failed attempts since the delivery was created or redelivered: they set the next delay.
  failures integer not null default 0,
  -- When a worker may next take it: due, scheduled after a failure, or claimed by a worker until
  -- then. Null once it succeeded or failed for good.
  next_attempt_at timestamptz,
  created_at timestamptz not null,
  unique (event_id, endpoint_id),
  check ((status = 'pending') = (next_attempt_at is not null))
);
create index webhook_deliveries_due_idx on webhook_deliveries (next_attempt_at) where status = 'pending';
create index webhook_deliveries_listing_idx on webhook_deliveries (endpoint_id, created_at desc, id desc);

create table webhook_attempts (
  id bigint generated always as identity primary key,
  delivery_id text not null references webhook_deliveries (id) on delete cascade,
  attempted_at timestamptz not null,
  -- The receiver's status, or null when no answer came (then `failure` says why).
  status_code integer,
  failure text,
  latency_ms integer not null,
  response_excerpt text not null default '',
  check ((status_code is null) <> (failure is null))
);
create index webhook_attempts_delivery_idx on webhook_attempts (delivery_id, id desc);

-- balance.low: armed while the balance is at or above the operator's threshold; the event fires when
-- an armed balance is found under it, and disarms it until the balance is back above.
alter table accounts add column balance_low_armed boolean not null default false;
