-- Organisations: an app's orgs, their members and teams (docs/orgs.md).
--
-- Scoped to an app and a key mode like everything an app owns. The app keys an org by its own
-- external id and members and teams by their own ext ids within the org (platform/identities.ts).

create table orgs (
  id text primary key,
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  external_id text not null,
  -- Names the org's chat identities and rooms on the chat server: lowercase, never reused, so a
  -- re-created org never reaches a deleted one's history.
  chat_key text not null unique check (chat_key ~ '^[a-z0-9]{12}$'),
  name text not null,
  logo_url text,
  policy text not null check (policy in ('anyone', 'teams', 'admins')),
  chat_enabled boolean not null,
  status text not null check (status in ('active', 'suspended', 'deleted')),
  -- Kept with each insert and delete under the org's row lock: the limits read them, not count(*).
  member_count integer not null default 0 check (member_count >= 0),
  team_count integer not null default 0 check (team_count >= 0),
  created_at timestamptz not null,
  updated_at timestamptz not null,
  deleted_at timestamptz,
  check ((status = 'deleted') = (deleted_at is not null))
);
-- One org per external id that is not deleted; deleted ones keep theirs (a re-creation must say so).
create unique index orgs_external_id_idx on orgs (app_id, mode, external_id) where status <> 'deleted';
create index orgs_deleted_idx on orgs (app_id, mode, external_id) where status = 'deleted';
create index orgs_list_idx on orgs (app_id, mode, created_at, id);

create table org_members (
  id text primary key,
  org_id text not null references orgs (id),
  ext_id text not null,
  -- The app user this member is, or null until the app links one.
  user_id text,
  role text not null check (role in ('admin', 'member', 'guest')),
  title text,
  status text not null check (status in ('active', 'disabled')),
  -- The linked user's own settings for this identity (PATCH /v1/me/org-memberships/{member_id}).
  display_name text,
  muted boolean not null default false,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  unique (org_id, ext_id)
);
create index org_members_list_idx on org_members (org_id, created_at, id);
-- A user's memberships across the app's orgs (GET /v1/me/org-memberships); the org's app and mode
-- are checked through the org.
create index org_members_user_idx on org_members (user_id, org_id) where user_id is not null;
-- At most one member per user in an org: one identity per org.
create unique index org_members_one_per_user_idx on org_members (org_id, user_id) where user_id is not null;

create table org_teams (
  id text primary key,
  org_id text not null references orgs (id),
  ext_id text not null,
  name text not null,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  unique (org_id, ext_id)
);
create index org_teams_list_idx on org_teams (org_id, created_at, id);

create table org_team_members (
  team_id text not null references org_teams (id) on delete cascade,
  member_id text not null references org_members (id) on delete cascade,
  primary key (team_id, member_id)
);
create index org_team_members_member_idx on org_team_members (member_id);
