-- Bookkeeping rows that only ever grew, and how their pruning finds the old ones:
-- - usage_flushes: a row per account per accrual batch, a batch a second per replica with usage. A
--   row guards its batch against being applied twice, which only a batch still in Redis can be; BRIN
--   suits rows that arrive in time order.
-- - live_sessions and live_published_quality: a row or two per participant ever; a closed session
--   is never read again once LiveKit can no longer send its events again.
-- - chat_monthly_active_users: a row per user and month; only the current month takes inserts.
-- - storage_metered_days: a row per app, mode and day; only today's is looked at.
create index usage_flushes_flushed_at_idx on usage_flushes using brin (flushed_at);
create index live_sessions_left_at_idx on live_sessions (left_at) where left_at is not null;
create index chat_monthly_active_users_month_idx on chat_monthly_active_users (month);
create index storage_metered_days_day_idx on storage_metered_days (day);
