-- Circles (docs/circles.md): communities an app user starts, with a code, an Announcements board, a
-- General room, more rooms and boards, members with roles and join rules. A circle is an org of kind
-- 'circle': its members' identities, revocations, reach checks and usage are the org model's.

alter table orgs drop constraint orgs_kind_check;
alter table orgs add constraint orgs_kind_check check (kind in ('org', 'business', 'circle'));

-- Circle roles: owner (also an admin), admin, mod, member. A removed member's row stays (the member
-- list shows them, and they may rejoin by the circle's rule); a blocked one cannot rejoin until
-- restored; a rejected request stays so that its asker can see it (asking again is a new request).
alter table org_members drop constraint org_members_role_check;
alter table org_members add constraint org_members_role_check
  check (role in ('admin', 'member', 'guest', 'owner', 'staff', 'mod'));
alter table org_members drop constraint org_members_status_check;
alter table org_members add constraint org_members_status_check
  check (status in ('active', 'disabled', 'invited', 'requested', 'blocked', 'removed', 'rejected'));

create table circles (
  org_id text primary key references orgs (id),
  join_rule text not null check (join_rule in ('open', 'approval', 'invite')),
  -- Whether members (not only admins and mods) may create rooms.
  members_create_rooms boolean not null,
  calls boolean not null
);

-- Rooms (everyone chats) and boards (admins and mods announce).
create table circle_rooms (
  id text primary key,
  -- The order rooms were made in (several are made at one instant: a circle's first two).
  seq bigint generated always as identity,
  org_id text not null references orgs (id),
  kind text not null check (kind in ('room', 'board')),
  -- Names the room on the chat server: <prefix>.+<org key>.r+<room key>.
  room_key text not null check (room_key ~ '^[a-z0-9]{10}$'),
  name text not null,
  -- Any member may join it (a closed room takes members a mod or its creator adds).
  open boolean not null,
  -- New members are put in it.
  auto_join boolean not null,
  created_by text references org_members (id) on delete set null,
  created_at timestamptz not null,
  updated_at timestamptz not null,
  -- Archived: nobody posts, it leaves every member's app, its history stays.
  archived_at timestamptz,
  unique (org_id, room_key)
);
create index circle_rooms_org_idx on circle_rooms (org_id, seq);

-- Who is in which room. Every active member is on every board without a row here: a board's rows
-- are the members who muted it (they cannot leave it).
create table circle_room_members (
  room_id text not null references circle_rooms (id),
  member_id text not null references org_members (id) on delete cascade,
  muted boolean not null default false,
  joined_at timestamptz not null,
  primary key (room_id, member_id)
);
create index circle_room_members_member_idx on circle_room_members (member_id);
