-- Dashboard sessions and invitations are read only while they work (a session until it expires, an
-- invitation until it expires, is accepted or is revoked, each well within its expiry), and are
-- pruned a month after they expire; found by when they expire.
create index dashboard_sessions_expires_at_idx on dashboard_sessions (expires_at);
create index dashboard_invites_expires_at_idx on dashboard_invites (expires_at);
