-- Webhook ids are kept only as long as LiveKit may retry a delivery (the retention is in the live
-- module); the daily pruning finds the old ones by when they arrived.
create index livekit_events_received_at_idx on livekit_events (received_at);
