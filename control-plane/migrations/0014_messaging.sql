-- Messaging: in-app OTPs and promos delivered through the chat server (docs/messaging.md).
--
-- Scoped to an app and a key mode like everything an app owns. Recipients are the app's own user ids
-- (platform/identities.ts), reached directly or through a phone number the user registered.

-- One phone per user and one user per phone, within an app and mode. The app's server may move a
-- phone from one user to another (it vouches for its users); a user may only claim a free one.
create table user_phones (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  user_id text not null,
  -- E.164: a plus, a country code that does not start with 0, 15 digits at most.
  phone text not null check (phone ~ '^\+[1-9][0-9]{1,14}$'),
  set_by text not null check (set_by in ('app', 'user')),
  updated_at timestamptz not null,
  primary key (app_id, mode, user_id),
  unique (app_id, mode, phone)
);

-- Every send, delivered or not: the limits count these rows, and the server's notice of arrival
-- (arrived_at) is matched to them by id (the XMPP message's id).
create table messages (
  id text primary key,
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  kind text not null check (kind in ('otp', 'promo')),
  -- 'account' (the app's own identity) or 'profile:<user id>' (a profile's).
  sender text not null,
  -- `to` as the caller sent it (a user id or a phone number).
  recipient text not null,
  -- Whom the limits count: 'user:<user id>' when the recipient is known, else 'phone:<number>'.
  recipient_key text not null,
  user_id text,
  channel text not null check (channel in ('in_app', 'account', 'profile')),
  delivered boolean not null,
  reason text,
  created_at timestamptz not null,
  arrived_at timestamptz
);
create index messages_recipient_idx on messages (app_id, mode, kind, recipient_key, created_at);
create index messages_sender_idx on messages (app_id, mode, sender, created_at) where kind = 'promo';
create index messages_created_at_idx on messages (created_at);

-- The live code of each recipient (`to` as sent): a keyed hash, never the code. A new send replaces
-- it; a right answer, the fifth wrong one or the end of its five minutes ends it.
create table otp_codes (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  recipient text not null,
  message_id text not null references messages (id) on delete cascade,
  code_hash bytea not null,
  expires_at timestamptz not null,
  failed_attempts smallint not null default 0 check (failed_attempts between 0 and 5),
  primary key (app_id, mode, recipient)
);
create index otp_codes_expires_at_idx on otp_codes (expires_at);

-- A user who does not want a sender's promos: 'account' or 'profile:<user id>', as in messages.sender.
create table promo_opt_outs (
  app_id text not null references apps (id),
  mode text not null check (mode in ('live', 'test')),
  user_id text not null,
  sender text not null,
  -- Where the user said so: a STOP reply in the chat, or the /v1/me API.
  source text not null check (source in ('chat', 'api')),
  created_at timestamptz not null,
  primary key (app_id, mode, user_id, sender)
);

-- A charge at commit is conditional (a balance that cannot pay refuses the call) unless the work
-- cannot be taken back once done: a message handed to the chat server is charged in full, like usage
-- after the fact, and an empty balance was refused before anything was sent.
alter table charges_at_commit add column conditional boolean not null default true;

create or replace function svc_charge_at_commit() returns trigger
language plpgsql
set client_min_messages = notice
as $$
declare
  r record;
begin
  delete from charges_at_commit c where c.ctid = new.ctid;
  select * into r from svc_meter(new.account_id, new.app_id, new.mode, new.day, new.at, new.ledger_id,
                                 new.products, new.metrics, new.quantities, new.prices, new.units,
                                 new.allowances, new.conditional);
  if new.idempotency_key is not null then
    update idempotency_keys k set cost_micros = r.charged_micros
      where k.app_id = new.app_id and k.mode = new.mode and k.key = new.idempotency_key;
  end if;
  raise notice 'svc_charged % % % %', r.charged_micros, coalesce(r.balance_micros_after::text, '-'),
    coalesce(r.version_after::text, '-'), case when r.crossed_zero then 't' else 'f' end;
  return null;
end;
$$;
