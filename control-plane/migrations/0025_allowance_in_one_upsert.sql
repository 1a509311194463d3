-- A charge within a free allowance in one upsert of its allowance row, not four statements.
--
-- svc_meter read the row, inserted it if missing, read it again locked and updated it: four statements
-- for every call of an account still inside its monthly allowance (most calls of a small app), each
-- with its executor start and the row's check constraints read anew. One INSERT … ON CONFLICT DO
-- UPDATE does the same from the locked row. What it granted is kept in last_free, a column written by
-- every upsert and read only by its own RETURNING. The plain read first stays: once the allowance is
-- used, no row is locked. Restated whole from 0016; only the allowance block changed.

alter table allowance_usage add column last_free bigint not null default 0;

create or replace function svc_meter(
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
  p_org text default '',
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
        -- One upsert takes what is left of the allowance, from the row as it is once locked: its SET
        -- reads the row before the update, and last_free carries what was taken to RETURNING, which
        -- sees only the row after it.
        insert into allowance_usage as u (account_id, mode, month, product, metric, used, last_free)
          values (p_account, p_mode, v_month, p_products[i], p_metrics[i],
                  least(p_quantities[i], p_allowances[i]), least(p_quantities[i], p_allowances[i]))
          on conflict (account_id, mode, month, product, metric) do update
            set used = u.used + greatest(0, least(excluded.last_free, p_allowances[i] - u.used)),
                last_free = greatest(0, least(excluded.last_free, p_allowances[i] - u.used))
          returning u.last_free into v_free;
      end if;
    end if;
    -- A row's cost is always floor(billable * price / unit): an addition costs the increase of it, so
    -- the additions of a day add up exactly to the day's cost, even for fractions of a micro-dollar.
    insert into usage_daily as u (account_id, app_id, mode, day, product, metric, price_micros, unit_size,
                                  org_id, quantity, billable_quantity, cost_micros, updated_at)
      values (p_account, p_app, p_mode, p_day, p_products[i], p_metrics[i], p_prices[i], p_units[i],
              p_org, p_quantities[i], p_quantities[i] - v_free,
              floor((p_quantities[i] - v_free)::numeric * p_prices[i] / p_units[i])::bigint, p_at)
      on conflict (app_id, mode, day, product, metric, price_micros, unit_size, org_id) do update
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
