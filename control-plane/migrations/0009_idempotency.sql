-- Idempotency keys: a POST sent again with the same Idempotency-Key answers what the first answered
-- (status, body, handler headers, cost) and does nothing twice, for 24 hours.
--
-- A row is claimed before the handler runs (locked_until set, no status yet), and answered in the same
-- transaction as the call's charge: both commit or neither does. A run that stopped without an answer
-- (its process died) leaves its claim to lapse at locked_until; a row past its window starts over.
create table idempotency_keys (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  key text not null,
  -- SHA-256 (hex) of the method, the route and the canonical params, query and body.
  fingerprint text not null,
  -- Which attempt holds the key: only its holder may answer or release it.
  claim text not null,
  -- While the handler runs; null once answered.
  locked_until timestamptz,
  status smallint,
  body text,
  headers jsonb not null default '{}',
  cost_micros bigint not null default 0,
  created_at timestamptz not null,
  primary key (app_id, mode, key),
  check ((status is null) = (body is null) and (status is null) <> (locked_until is null))
);
-- Pruning finds rows past their window by when they were claimed.
create index idempotency_keys_created_at_idx on idempotency_keys (created_at);

-- A priced call's answer learns its cost where the cost is known: inside the COMMIT that charges it.
alter table charges_at_commit add column idempotency_key text;

create or replace function svc_charge_at_commit() returns trigger
language plpgsql
set client_min_messages = notice
as $$
declare
  r record;
begin
  delete from charges_at_commit c where c.ctid = new.ctid;
  select * into r from svc_meter(new.account_id, new.app_id, new.mode, new.day, new.at, new.ledger_id,
                                 new.products, new.metrics, new.quantities, new.prices, new.units,
                                 new.allowances, true);
  if new.idempotency_key is not null then
    update idempotency_keys k set cost_micros = r.charged_micros
      where k.app_id = new.app_id and k.mode = new.mode and k.key = new.idempotency_key;
  end if;
  raise notice 'svc_charged % % % %', r.charged_micros, coalesce(r.balance_micros_after::text, '-'),
    coalesce(r.version_after::text, '-'), case when r.crossed_zero then 't' else 'f' end;
  return null;
end;
$$;

-- Claims a key for one attempt, in one round trip: a new key, one past its window (p_window_start) or
-- one whose run lapsed (locked_until) is claimed (claimed true); otherwise the row as it stands is
-- returned (answered, or still running) for the caller to replay or refuse. Each statement of a
-- function sees what committed before it began, so a row answered while this waited is seen answered.
create function svc_idempotency_claim(
  p_app text,
  p_mode text,
  p_key text,
  p_fingerprint text,
  p_claim text,
  p_now timestamptz,
  p_window_start timestamptz,
  p_locked_until timestamptz,
  out claimed boolean,
  out fingerprint text,
  out status integer,
  out body text,
  out headers jsonb,
  out cost_micros bigint
) language plpgsql as $$
begin
  -- A row released or pruned between two statements is tried again.
  for attempt in 1 .. 3 loop
    insert into idempotency_keys as k (app_id, mode, key, fingerprint, claim, locked_until, created_at)
      values (p_app, p_mode, p_key, p_fingerprint, p_claim, p_locked_until, p_now)
      on conflict do nothing;
    if found then
      claimed := true;
      return;
    end if;
    update idempotency_keys k
      set fingerprint = p_fingerprint, claim = p_claim, locked_until = p_locked_until, status = null,
          body = null, headers = '{}', cost_micros = 0, created_at = p_now
      where k.app_id = p_app and k.mode = p_mode and k.key = p_key
        and (k.created_at <= p_window_start or (k.status is null and k.locked_until <= p_now));
    if found then
      claimed := true;
      return;
    end if;
    select false, k.fingerprint, k.status, k.body, k.headers, k.cost_micros
      into claimed, fingerprint, status, body, headers, cost_micros
      from idempotency_keys k
      where k.app_id = p_app and k.mode = p_mode and k.key = p_key;
    if found then
      return;
    end if;
  end loop;
  raise exception 'idempotency key of app % kept changing', p_app;
end;
$$;
