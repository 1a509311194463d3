-- Moments and studio assets go with the media storage takes down with its object (a test object's
-- seven days, a lifecycle expiry), in the same transaction. Until now only the media went: hidden by
-- every read, such rows stayed in the listing indexes, which each page walked past, and no delete
-- took them. Those already here go now, at the time their media went.
update moments mo set deleted_at = m.deleted_at
from media m
where m.id = mo.media_id and m.deleted_at is not null and mo.deleted_at is null;
update studio_assets s set deleted_at = m.deleted_at
from media m
where m.id = s.media_id and m.deleted_at is not null and s.deleted_at is null;

-- What shows the media taken down, found by them: each sweep's batch reads only its own.
create index moments_media_idx on moments (media_id) where deleted_at is null;
create index studio_assets_media_idx on studio_assets (media_id) where deleted_at is null;
