-- When the reconciler first found an open session missing from LiveKit's room. It closes a session
-- only once it has been missing that long (RECONCILE_GRACE_MS): counted from the last sighting, a
-- pass could close a participant who had just left, before LiveKit's retried leave arrived, and bill
-- it only up to the sighting.
alter table live_sessions add column missing_since timestamptz;
