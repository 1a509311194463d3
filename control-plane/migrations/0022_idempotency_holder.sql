-- A key's claim names the process that holds it (<instance>.<attempt>, platform/liveness.ts): a run
-- whose process is gone (its heartbeat lapsed in Redis) is taken over at once instead of when its lock
-- lapses. svc_idempotency_claim answers the holder of a running key for that check.
drop function svc_idempotency_claim(text, text, text, text, text, timestamptz, timestamptz, timestamptz);

create function svc_idempotency_claim(
  p_app text,
  p_mode text,
  p_key text,
  p_fingerprint text,
  p_claim text,
  p_now timestamptz,
  p_window_start timestamptz,
  p_locked_until timestamptz,
  out claimed boolean,
  out fingerprint text,
  out status integer,
  out body text,
  out headers jsonb,
  out cost_micros bigint,
  out holder text
) language plpgsql as $$
begin
  -- A row released or pruned between two statements is tried again.
  for attempt in 1 .. 3 loop
    insert into idempotency_keys as k (app_id, mode, key, fingerprint, claim, locked_until, created_at)
      values (p_app, p_mode, p_key, p_fingerprint, p_claim, p_locked_until, p_now)
      on conflict do nothing;
    if found then
      claimed := true;
      return;
    end if;
    update idempotency_keys k
      set fingerprint = p_fingerprint, claim = p_claim, locked_until = p_locked_until, status = null,
          body = null, headers = '{}', cost_micros = 0, created_at = p_now
      where k.app_id = p_app and k.mode = p_mode and k.key = p_key
        and (k.created_at <= p_window_start or (k.status is null and k.locked_until <= p_now));
    if found then
      claimed := true;
      return;
    end if;
    select false, k.fingerprint, k.status, k.body, k.headers, k.cost_micros, k.claim
      into claimed, fingerprint, status, body, headers, cost_micros, holder
      from idempotency_keys k
      where k.app_id = p_app and k.mode = p_mode and k.key = p_key;
    if found then
      return;
    end if;
  end loop;
  raise exception 'idempotency key of app % kept changing', p_app;
end;
$$;
