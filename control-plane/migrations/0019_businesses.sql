-- Businesses (docs/businesses.md): orgs an app user registers for themselves, with one public chat
-- (the inbox) that customers reach by the business's code, a team that works it, shortcuts, and the
-- team's group chats. A business is an org of kind 'business': its members, identities, group rooms
-- (org teams), revocations, reach checks and usage are the org model's.

alter table orgs add column kind text not null default 'org' check (kind in ('org', 'business'));
alter table orgs alter column kind drop default;

-- Business members: owner, admin, staff. Invited and requested members are people asked to join
-- (the invite's id is the member's) or asking to (a join request's id is the member's): no identity
-- of theirs logs in until they are active.
alter table org_members drop constraint org_members_role_check;
alter table org_members add constraint org_members_role_check
  check (role in ('admin', 'member', 'guest', 'owner', 'staff'));
alter table org_members drop constraint org_members_status_check;
alter table org_members add constraint org_members_status_check
  check (status in ('active', 'disabled', 'invited', 'requested'));
-- At most one owner per business.
create unique index org_members_one_owner_idx on org_members (org_id) where role = 'owner';
-- A user's invites across the app's businesses (GET /v1/me/org-invites).
create index org_members_invited_idx on org_members (user_id, created_at, id) where status = 'invited';
-- A business's join requests, newest first.
create index org_members_requested_idx on org_members (org_id, created_at, id) where status = 'requested';

create table businesses (
  org_id text primary key references orgs (id),
  -- Who may start a chat: anyone with the code, only customers the business opened a chat with, nobody.
  access text not null check (access in ('code', 'invited', 'nobody')),
  calls boolean not null,
  -- Who answers a new conversation first: the staff, or the business's greeting and then the staff.
  front_desk text not null check (front_desk in ('staff', 'greeting')),
  greeting text,
  -- Whether customers see each staff member's title or only the business's name (numbered).
  staff_names text not null check (staff_names in ('shown', 'hidden')),
  -- The one public chat: its id, name and line (the text customers see under its name).
  inbox_id text not null unique,
  inbox_name text not null,
  inbox_line text,
  -- Quick replies: [{"key": …, "text": …}], replaced whole.
  shortcuts jsonb not null default '[]'::jsonb,
  -- Numbers the staff for their hidden names, never reused within the business.
  next_staff_number integer not null default 1,
  check (front_desk = 'staff' or greeting is not null)
);

-- Codes people type or scan to find a business or a member (and, later, a circle): one namespace
-- per app and mode. A regenerated code is deleted and a new one made: the old one finds nothing.
create table codes (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  code text not null check (code ~ '^[23456789ABCDEFGHJKMNPQRSTVWXYZ]{8}$'),
  user_id text,
  org_id text references orgs (id),
  created_at timestamptz not null,
  primary key (app_id, mode, code),
  check ((user_id is null) <> (org_id is null))
);
create unique index codes_user_idx on codes (app_id, mode, user_id) where user_id is not null;
create unique index codes_org_idx on codes (org_id) where org_id is not null;

-- Who works the inbox, and whether they may reply (or only read).
create table business_staff (
  member_id text primary key references org_members (id) on delete cascade,
  org_id text not null references orgs (id),
  may_reply boolean not null,
  -- Their number in the business's hidden names ("Acme (3)").
  number integer not null,
  unique (org_id, number)
);
create index business_staff_org_idx on business_staff (org_id);

-- One conversation per customer per business: a members-only room on the chat server.
create table business_conversations (
  id text primary key,
  org_id text not null references orgs (id),
  -- The customer: an app user, by the app's own id.
  user_id text not null,
  -- Names the room: <prefix>.+<org key>.c+<room key>.
  room_key text not null check (room_key ~ '^[a-z0-9]{10}$'),
  -- The customer's name in the room.
  customer_name text not null,
  opened_by text not null check (opened_by in ('customer', 'business')),
  created_at timestamptz not null,
  reopened_at timestamptz not null,
  unique (org_id, user_id),
  unique (org_id, room_key)
);
create index business_conversations_list_idx on business_conversations (org_id, created_at, id);
-- A customer's conversations across the app's businesses.
create index business_conversations_user_idx on business_conversations (user_id);

-- People who declined a business's invite: it cannot invite them or open a chat with them again
-- until they ask to join.
create table business_refusals (
  org_id text not null references orgs (id),
  user_id text not null,
  created_at timestamptz not null,
  primary key (org_id, user_id)
);
