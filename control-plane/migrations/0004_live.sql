-- Live streams and calls: each participant session as LiveKit reports it, metered when it ends.

-- Every LiveKit webhook handled, by its event id: a retried delivery is recognised and ignored.
create table livekit_events (
  id text primary key,
  event text not null,
  received_at timestamptz not null
);

create table live_sessions (
  participant_sid text primary key,
  room text not null,
  identity text not null,
  app_id text not null references apps (id),
  account_id text not null references accounts (id),
  mode text not null check (mode in ('live', 'test')),
  kind text not null check (kind in ('live', 'call', 'audio')),
  publisher boolean not null,
  declared_quality text not null check (declared_quality in ('hd', 'fhd', '4k')),
  joined_at timestamptz not null,
  -- Moved forward by the reconciler while LiveKit still lists the participant: if the leave is
  -- never reported, the session is billed up to here.
  last_seen_at timestamptz not null,
  left_at timestamptz,
  billed_seconds integer check (billed_seconds >= 0),
  check ((left_at is null) = (billed_seconds is null))
);
create index live_sessions_open_idx on live_sessions (room) where left_at is null;

-- The highest video quality a participant has published (from track_published), kept apart from the
-- session because a track can be reported before its participant is.
create table live_published_quality (
  participant_sid text primary key,
  quality text not null check (quality in ('hd', 'fhd', '4k'))
);
