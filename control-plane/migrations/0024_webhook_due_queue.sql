-- Pending webhook deliveries move to a narrow queue of their own, one row each, claimed per endpoint.
--
-- A claim used to move each delivery's next_attempt_at, and a success to clear it: both columns of the
-- partial due index, so every claim and every success was a new version of the wide delivery row with
-- an entry in each of its four indexes. A claim also walked the due index from its head, past every
-- due row of the endpoints it skipped (a fast endpoint already holding its share), so an endpoint's
-- backlog made every claim longer. Now a claim walks each endpoint's own due rows (the queue's
-- (endpoint_id, due_at) index) and moves only the narrow row; a success deletes it and marks the
-- delivery succeeded, which no index reads (a HOT update, hence the delivery table's fill factor).
--
-- Neither the queue nor the attempts reference their delivery with a foreign key: its check, a locking
-- lookup of the delivery for every row written, cost more than writing the row (46 against 32 µs a
-- row to mark deliveries succeeded and insert their attempts, 500 at a time). Every statement that
-- inserts either row holds its delivery's row (it inserts it, or updates or locks it first), so a
-- deletion of the delivery waits for it, and the trigger below then deletes what references the
-- delivery. A statement writing both takes the endpoint, the delivery, then the queue row, as a
-- deletion does (the endpoint, the cascade to its deliveries, then the trigger).
create table webhook_due (
  delivery_id text primary key,
  endpoint_id text not null,
  -- When a worker may next take it: due, scheduled after a failure, or claimed by a worker until then.
  due_at timestamptz not null,
  -- The delivery's: past the events' retention a delivery is never sent.
  created_at timestamptz not null,
  -- A test ping, which goes to a disabled endpoint too.
  ping boolean not null
);
create index webhook_due_endpoint_idx on webhook_due (endpoint_id, due_at);
-- A disabled endpoint's pings, found without walking the backlog it keeps for when it is enabled.
create index webhook_due_ping_idx on webhook_due (endpoint_id, due_at) where ping;

insert into webhook_due (delivery_id, endpoint_id, due_at, created_at, ping)
select d.id, d.endpoint_id, d.next_attempt_at, d.created_at, ev.type = 'ping'
from webhook_deliveries d join webhook_events ev on ev.id = d.event_id
where d.status = 'pending';

-- A pending delivery is one with a queue row; the statements that change either change both.
drop index webhook_deliveries_due_idx;
alter table webhook_deliveries drop constraint if exists webhook_deliveries_check;
alter table webhook_deliveries drop column next_attempt_at;
alter table webhook_deliveries set (fillfactor = 80);
alter table webhook_attempts drop constraint webhook_attempts_delivery_id_fkey;

-- What the foreign keys' cascades did, once a statement rather than a lookup a row.
create function svc_webhook_deliveries_deleted() returns trigger
language plpgsql as $$
begin
  delete from webhook_due where delivery_id in (select id from deleted);
  delete from webhook_attempts where delivery_id in (select id from deleted);
  return null;
end $$;
create trigger webhook_deliveries_deleted after delete on webhook_deliveries
  referencing old table as deleted for each statement execute function svc_webhook_deliveries_deleted();
