-- The developer dashboard: the people of an account, their sessions and the invitations that bring
-- them in. Passwords are scrypt hashes; session and invitation tokens are stored as SHA-256 only.
create table dashboard_users (
  id text primary key,
  account_id text not null references accounts (id),
  -- Kept lowercased: one person, one address, whatever the case they type it in.
  email text not null unique check (email = lower(email)),
  name text not null,
  role text not null check (role in ('owner', 'developer', 'viewer')),
  password_hash text not null,
  created_at timestamptz not null
);
create index dashboard_users_account_idx on dashboard_users (account_id, created_at);

create table dashboard_sessions (
  id text primary key,
  user_id text not null references dashboard_users (id) on delete cascade,
  token_hash bytea not null unique,
  user_agent text not null,
  address text not null,
  created_at timestamptz not null,
  last_seen_at timestamptz not null,
  expires_at timestamptz not null,
  revoked_at timestamptz
);
create index dashboard_sessions_user_idx on dashboard_sessions (user_id, created_at desc);

create table dashboard_invites (
  id text primary key,
  account_id text not null references accounts (id),
  email text not null check (email = lower(email)),
  role text not null check (role in ('owner', 'developer', 'viewer')),
  token_hash bytea not null unique,
  -- Null for the operator's invitation of an account's first owner (the admin CLI).
  invited_by text references dashboard_users (id) on delete set null,
  created_at timestamptz not null,
  expires_at timestamptz not null,
  accepted_at timestamptz,
  revoked_at timestamptz
);
create index dashboard_invites_account_idx on dashboard_invites (account_id, created_at desc);

-- When each key last authenticated a request: written at most once a minute per key and replica.
alter table api_keys add column last_used_at timestamptz;

-- The account's own balance.low threshold; null takes the operator's SVC_BALANCE_LOW_USD, 0 turns it off.
alter table accounts add column low_balance_threshold_micros bigint
  check (low_balance_threshold_micros >= 0);
