-- A priced call that writes charges when its transaction commits, not before.
--
-- The charge locks the account's balance row (and its allowance and usage rows) until the commit. Taken
-- in a statement of its own, the lock was also held while the result travelled to the control plane,
-- waited its turn on a busy event loop and the COMMIT travelled back: calls of one account queued
-- behind milliseconds of nothing. Inserted here instead, the charge runs inside COMMIT (a deferred
-- constraint trigger), so the rows are locked only for svc_meter and the WAL flush.
--
-- Rows never outlive their transaction (the trigger deletes its row), so the table is unlogged and has
-- no index.
create unlogged table charges_at_commit (
  account_id text not null,
  app_id text not null,
  mode text not null,
  day date not null,
  at timestamptz not null,
  ledger_id text not null,
  products text[] not null,
  metrics text[] not null,
  quantities bigint[] not null,
  prices bigint[] not null,
  units bigint[] not null,
  allowances bigint[] not null
);

-- The charge, as a priced call's (conditional: SQLSTATE SV402 fails the COMMIT, which rolls the call's
-- work back). What was charged goes back to the caller as a notice of the COMMIT, the one message a
-- commit can carry: 'svc_charged <cost> <balance after|-> <version after|-> <crossed zero t|f>'.
create function svc_charge_at_commit() returns trigger
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
  raise notice 'svc_charged % % % %', r.charged_micros, coalesce(r.balance_micros_after::text, '-'),
    coalesce(r.version_after::text, '-'), case when r.crossed_zero then 't' else 'f' end;
  return null;
end;
$$;

create constraint trigger charge_at_commit after insert on charges_at_commit
  deferrable initially deferred
  for each row execute function svc_charge_at_commit();
