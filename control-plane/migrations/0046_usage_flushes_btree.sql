-- usage_flushes' time index is a btree, not the BRIN of 0044: pruning frees the oldest pages, new rows
-- reuse them, and a BRIN range once widened never narrows, so each minute's prune would soon read the
-- whole table.
drop index usage_flushes_flushed_at_idx;
create index usage_flushes_flushed_at_idx on usage_flushes (flushed_at);
