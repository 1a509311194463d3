-- Realtime settings of an app, one row per key mode: the sandbox (test keys) has its own prefix,
-- publishable key and shield secret, so test users and rooms never meet live ones.
create table realtime_apps (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  -- Scopes the app's chat users (<prefix>.<user_id>) and rooms (<prefix>.<room>) inside ejabberd.
  chat_prefix text not null unique check (chat_prefix ~ '^[a-z0-9]{10}$'),
  publishable_key_id text not null references api_keys (id),
  -- Kept readable: the integrator's server needs it to verify shield tickets, and app setup returns it.
  shield_secret text not null,
  mam boolean not null,
  products text[] not null check (products <@ array['chat', 'live', 'calls']),
  max_room_size integer not null check (max_room_size between 2 and 100000),
  created_at timestamptz not null,
  updated_at timestamptz not null,
  primary key (app_id, mode)
);

-- Every user that was ever given a chat credential: ejabberd asks whether a user exists (isuser)
-- to route messages to users who are offline or whose credential has expired.
create table chat_users (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  user_id text not null,
  created_at timestamptz not null,
  primary key (app_id, mode, user_id)
);

-- Rooms made through the API, so that settings changes can be applied to each of them.
create table chat_rooms (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  room text not null,
  created_at timestamptz not null,
  primary key (app_id, mode, room)
);
