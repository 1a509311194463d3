-- Deleting a webhook endpoint marks it deleted; its deliveries and attempts go afterwards, in batches.
--
-- A delete of the endpoint row took every delivery of the last 30 days with it, and their attempts and
-- queue rows, in one statement: tens of millions of rows for a busy endpoint, minutes of WAL, with the
-- endpoint row locked throughout, so every transaction emitting an event the endpoint wanted (the
-- app's own writes, through the outbox) waited for it. A deleted endpoint is seen by nothing (the API,
-- the outbox, claims); the webhook purge deletes its deliveries a batch at a time, then the row.
alter table webhook_endpoints add column deleted_at timestamptz;
create index webhook_endpoints_deleted_idx on webhook_endpoints (deleted_at) where deleted_at is not null;
