-- An org's open calls, found when a member or the whole org loses them (docs/orgs.md).
create index live_sessions_org_open_idx on live_sessions (org_id) where left_at is null and org_id is not null;
