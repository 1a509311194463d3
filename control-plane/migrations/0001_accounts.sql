-- Accounts own a plan, a prepaid balance and apps; apps own keys. Money is integer micro-dollars.
create table accounts (
  id text primary key,
  name text not null,
  plan text not null check (plan in ('free', 'pro', 'scale')),
  -- Only Scale accounts carry a custom daily request cap; Free and Pro take their plan's.
  daily_request_cap integer check (daily_request_cap > 0),
  balance_micros bigint not null default 0 check (balance_micros >= 0),
  created_at timestamptz not null
);

create table apps (
  id text primary key,
  account_id text not null references accounts (id),
  name text not null,
  created_at timestamptz not null
);
create index apps_account_id_idx on apps (account_id);

create table api_keys (
  id text primary key,
  app_id text not null references apps (id),
  kind text not null check (kind in ('secret', 'publishable')),
  mode text not null check (mode in ('live', 'test')),
  -- Keys are looked up by the SHA-256 of the presented token; secret tokens are never stored.
  token_hash bytea not null unique,
  token_hint text not null,
  -- Publishable keys are public by design (they ship in client code), so they stay readable.
  publishable_token text,
  created_at timestamptz not null,
  revoked_at timestamptz,
  check ((kind = 'publishable') = (publishable_token is not null))
);
create index api_keys_app_id_idx on api_keys (app_id);

-- Append-only: every change of a balance is a row here, written in the same transaction.
create table ledger_entries (
  id text primary key,
  account_id text not null references accounts (id),
  kind text not null check (kind in ('topup')),
  amount_micros bigint not null,
  -- The caller's idempotency reference: a top-up replayed with the same reference counts once.
  reference text not null,
  balance_after_micros bigint not null check (balance_after_micros >= 0),
  created_at timestamptz not null,
  unique (account_id, kind, reference)
);
create index ledger_entries_account_created_idx on ledger_entries (account_id, created_at desc);
