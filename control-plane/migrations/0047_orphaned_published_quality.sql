-- A published quality whose session never came (a track reported in a room of no app, or a participant
-- whose join and leave were both lost) was never pruned: the prune of 0044 takes a quality with its
-- ended session. When it was first reported says which are old enough to go; rows already here count
-- from now.
alter table live_published_quality add column reported_at timestamptz not null default now();
create index live_published_quality_reported_at_idx on live_published_quality (reported_at);
