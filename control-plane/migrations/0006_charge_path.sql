-- The charge path: one SQL function meters usage and charges a live balance in one round trip, with
-- one lock order everywhere (account, then allowances, then usage rows, then the ledger line).

-- Usage known only afterwards (minutes, bandwidth, stored bytes, monthly active users) is charged in
-- full: a balance may go below zero, and what is owed is repaid by the next top-up. Priced calls keep
-- a conditional debit, so they never take a balance below zero.
alter table accounts drop constraint accounts_balance_micros_check;
alter table ledger_entries drop constraint ledger_entries_balance_after_micros_check;

-- Bumped with every change of the balance: caches of whether an account can pay (Redis) keep the
-- newest state whatever order their updates arrive in.
alter table accounts add column balance_version bigint not null default 0;

-- The ledger is read newest first per account; a usage line changes with every charge of its day, so
-- updated_at is kept out of every index: its updates stay HOT (no index entries to write each time).
drop index ledger_entries_account_updated_idx;
create index ledger_entries_account_idx on ledger_entries (account_id);

-- Usage accrued in Redis (read bandwidth, monthly active users, chat users) is flushed in batches;
-- each batch is applied once per account, however often a crashed flush is retried.
create table usage_flushes (
  batch_id text not null,
  account_id text not null references accounts (id),
  flushed_at timestamptz not null,
  primary key (batch_id, account_id)
);

-- Meters usages of one payer (sorted by product and metric by the caller) and, for a live key, takes
-- their cost from the balance and adds it to the app's usage line of the day.
--   p_conditional: a priced call. Refused (SQLSTATE SV402, nothing written) when the balance is zero or
--   less, or does not cover the cost. Otherwise (post-metered usage) the cost is taken in full.
-- Returns the cost, the balance and its version after, and whether the balance crossed zero.
create function svc_meter(
  p_account text,
  p_app text,
  p_mode text,
  p_day date,
  p_at timestamptz,
  p_ledger_id text,
  p_products text[],
  p_metrics text[],
  p_quantities bigint[],
  p_prices bigint[],
  p_units bigint[],
  p_allowances bigint[],
  p_conditional boolean,
  out charged_micros bigint,
  out balance_micros_after bigint,
  out version_after bigint,
  out crossed_zero boolean
) language plpgsql as $$
declare
  v_month date := date_trunc('month', p_day)::date;
  v_before bigint;
  v_used bigint;
  v_free bigint;
  v_added bigint;
  i integer;
begin
  charged_micros := 0;
  crossed_zero := false;
  if p_mode = 'live' then
    -- The account row first, before any other row: concurrent charges of one account take turns here.
    -- FOR NO KEY UPDATE, not FOR UPDATE: a call's own writes that reference the account (a foreign key
    -- takes a KEY SHARE lock on it) must not make two calls of the account wait for each other.
    select a.balance_micros, a.balance_version into v_before, version_after
      from accounts a where a.id = p_account for no key update;
    if not found then
      raise exception 'no account %', p_account;
    end if;
    if p_conditional and v_before <= 0 then
      raise exception 'the balance (% micro-dollars) is empty', v_before using errcode = 'SV402';
    end if;
  end if;

  for i in 1 .. coalesce(array_length(p_products, 1), 0) loop
    continue when p_quantities[i] = 0;
    v_free := 0;
    if p_allowances[i] > 0 then
      -- A month's allowance only ever fills up: once it is used, a plain read says so, with no lock.
      select u.used into v_used from allowance_usage u
        where u.account_id = p_account and u.mode = p_mode and u.month = v_month
          and u.product = p_products[i] and u.metric = p_metrics[i];
      if v_used is null or v_used < p_allowances[i] then
        insert into allowance_usage (account_id, mode, month, product, metric, used)
          values (p_account, p_mode, v_month, p_products[i], p_metrics[i], 0)
          on conflict do nothing;
        select u.used into v_used from allowance_usage u
          where u.account_id = p_account and u.mode = p_mode and u.month = v_month
            and u.product = p_products[i] and u.metric = p_metrics[i]
          for no key update;
        v_free := greatest(0, least(p_quantities[i], p_allowances[i] - v_used));
        if v_free > 0 then
          update allowance_usage u set used = u.used + v_free
            where u.account_id = p_account and u.mode = p_mode and u.month = v_month
              and u.product = p_products[i] and u.metric = p_metrics[i];
        end if;
      end if;
    end if;
    -- A row's cost is always floor(billable * price / unit): an addition costs the increase of it, so
    -- the additions of a day add up exactly to the day's cost, even for fractions of a micro-dollar.
    insert into usage_daily as u (account_id, app_id, mode, day, product, metric, price_micros, unit_size,
                                  quantity, billable_quantity, cost_micros, updated_at)
      values (p_account, p_app, p_mode, p_day, p_products[i], p_metrics[i], p_prices[i], p_units[i],
              p_quantities[i], p_quantities[i] - v_free,
              floor((p_quantities[i] - v_free)::numeric * p_prices[i] / p_units[i])::bigint, p_at)
      on conflict (app_id, mode, day, product, metric, price_micros, unit_size) do update
        set quantity = u.quantity + excluded.quantity,
            billable_quantity = u.billable_quantity + excluded.billable_quantity,
            cost_micros = floor((u.billable_quantity + excluded.billable_quantity)::numeric * u.price_micros
                                / u.unit_size)::bigint,
            updated_at = greatest(u.updated_at, excluded.updated_at)
      returning (u.cost_micros - floor((u.billable_quantity - (p_quantities[i] - v_free))::numeric
                                       * u.price_micros / u.unit_size))::bigint
      into v_added;
    charged_micros := charged_micros + v_added;
  end loop;

  if p_mode <> 'live' then
    return;
  end if;
  if p_conditional and v_before < charged_micros then
    raise exception 'the balance (% micro-dollars) cannot pay %', v_before, charged_micros
      using errcode = 'SV402';
  end if;
  balance_micros_after := v_before;
  if charged_micros > 0 then
    update accounts a set balance_micros = a.balance_micros - charged_micros,
                          balance_version = a.balance_version + 1
      where a.id = p_account
      returning a.balance_micros, a.balance_version into balance_micros_after, version_after;
    insert into ledger_entries (id, account_id, kind, amount_micros, balance_after_micros, app_id, day,
                                created_at, updated_at)
      values (p_ledger_id, p_account, 'usage', -charged_micros, balance_micros_after, p_app, p_day, p_at, p_at)
      on conflict (account_id, app_id, day) where kind = 'usage' do update
        set amount_micros = ledger_entries.amount_micros + excluded.amount_micros,
            balance_after_micros = excluded.balance_after_micros,
            updated_at = greatest(ledger_entries.updated_at, excluded.updated_at);
  end if;
  crossed_zero := (v_before > 0) <> (balance_micros_after > 0);
end;
$$;

-- Realtime settings change by compare-and-set on this version: a PATCH calls ejabberd without holding
-- any lock, then writes only if nobody changed the settings meanwhile (else it starts over).
alter table realtime_apps add column version bigint not null default 0;
