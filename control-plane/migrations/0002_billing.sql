-- Prepaid billing: operator prices and allowances, metered usage per day, monthly allowance use,
-- chat monthly active users, and usage lines in the ledger.

-- Prices and free allowances set by the operator; anything not here takes the shipped default.
create table price_overrides (
  product text not null,
  metric text not null,
  price_micros bigint not null check (price_micros >= 0),
  updated_at timestamptz not null,
  primary key (product, metric)
);

create table allowance_overrides (
  product text not null,
  metric text not null,
  -- In the metric's base unit (calls, seconds, bytes, byte-days, users).
  quantity bigint not null check (quantity >= 0),
  updated_at timestamptz not null,
  primary key (product, metric)
);

-- Usage per UTC day, app, key mode, product and metric. A price change mid-day starts a new row,
-- so each row's cost is exactly floor(billable_quantity * price_micros / unit_size).
create table usage_daily (
  account_id text not null references accounts (id),
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  day date not null,
  product text not null,
  metric text not null,
  price_micros bigint not null,
  unit_size bigint not null check (unit_size > 0),
  quantity bigint not null check (quantity >= 0),
  billable_quantity bigint not null check (billable_quantity >= 0 and billable_quantity <= quantity),
  cost_micros bigint not null check (cost_micros >= 0),
  updated_at timestamptz not null,
  primary key (app_id, mode, day, product, metric, price_micros, unit_size)
);
create index usage_daily_account_idx on usage_daily (account_id, mode, day);

-- How much of each free monthly allowance an account has used, per key mode (the sandbox has its own).
create table allowance_usage (
  account_id text not null references accounts (id),
  mode text not null check (mode in ('live', 'test')),
  month date not null,
  product text not null,
  metric text not null,
  used bigint not null check (used >= 0),
  primary key (account_id, mode, month, product, metric)
);

-- The first login of each chat user in a month: one row, one monthly active user.
create table chat_monthly_active_users (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  month date not null,
  user_id text not null,
  first_login_at timestamptz not null,
  primary key (app_id, mode, month, user_id)
);

-- Usage lines: one per app per UTC day, holding that day's charges so far (a negative amount).
-- Top-up rows never change; a usage line is the running total of its day, detailed in usage_daily.
alter table ledger_entries drop constraint ledger_entries_kind_check;
alter table ledger_entries add constraint ledger_entries_kind_check check (kind in ('topup', 'usage'));
alter table ledger_entries add column app_id text references apps (id);
alter table ledger_entries add column day date;
alter table ledger_entries add column updated_at timestamptz;
update ledger_entries set updated_at = created_at;
alter table ledger_entries alter column updated_at set not null;
alter table ledger_entries alter column reference drop not null;
alter table ledger_entries add constraint ledger_entries_shape_check check (
  (kind = 'topup' and reference is not null and app_id is null and day is null and amount_micros > 0)
  or (kind = 'usage' and reference is null and app_id is not null and day is not null and amount_micros <= 0)
);
create unique index ledger_entries_usage_line_idx on ledger_entries (account_id, app_id, day) where kind = 'usage';
drop index ledger_entries_account_created_idx;
create index ledger_entries_account_updated_idx on ledger_entries (account_id, updated_at desc, id desc);
