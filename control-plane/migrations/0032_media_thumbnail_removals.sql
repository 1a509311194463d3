-- Thumbnails to remove from the object store, each once it is due: the hourly sweep reads these rows
-- instead of listing every thumbnail of every app (a request per 1,000 objects, and a lookup of each,
-- every hour, for as long as the bundle holds media).
--   - A thumbnail is scheduled before it is stored, due in an hour; the transaction that records its
--     media takes the row back. A write that fails without cleaning up leaves it due.
--   - Deleting media schedules its thumbnail in the same transaction, due at once; the removal after
--     the commit takes the row back. A removal that fails leaves it due.
create table media_thumbnail_removals (
  thumbnail_key text primary key,
  due_at timestamptz not null
);
create index media_thumbnail_removals_due_idx on media_thumbnail_removals (due_at);

-- The listing sweep ran hourly until now: media deleted in the last day may have a thumbnail whose
-- removal failed since its last run (removing one already gone is no error). A thumbnail of a write
-- that failed in the last hour before the upgrade is not found.
insert into media_thumbnail_removals (thumbnail_key, due_at)
select thumbnail_key, now() from media
where deleted_at > now() - interval '1 day' and starts_with(thumbnail_key, 'media/')
on conflict do nothing;
