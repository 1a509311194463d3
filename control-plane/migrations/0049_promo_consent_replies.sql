-- When the latest consent reply (STOP, START, ...) of a user to a sender was sent, in microseconds
-- since the epoch, as ejabberd stamped it (mod_svc_scope). ejabberd hands a user's replies to the
-- control-plane replicas at random, so a STOP and the START after it can commit in either order; a
-- reply older than the one noted here changes nothing, and the user's last word holds.
create table promo_consent_replies (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  user_id text not null,
  sender text not null,
  sent_at_us bigint not null,
  primary key (app_id, mode, user_id, sender)
);
