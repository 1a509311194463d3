import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from './caller.js';
import type { Clock } from './clock.js';
import { newId } from './ids.js';
import type { Transaction } from './transaction.js';

/** The spec's events, each about a profile's public activity (endpoints may pick profiles). */
export const PROFILE_EVENT_TYPES = [
  'buzz.created',
  'buzz.reaction',
  'buzz.comment',
  'sip.created',
  'follow.created',
] as const;

/** Every event an endpoint may subscribe to: the spec's, and the service's own about the app. */
export const EVENT_TYPES = [
  ...PROFILE_EVENT_TYPES,
  'message.received',
  'otp.delivered',
  'balance.low',
  'webhook_endpoint.disabled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
/** Sent only by an endpoint's test button, to that endpoint alone. */
export type TestEventType = 'ping';

export interface EventInput {
  appId: string;
  mode: KeyMode;
  type: EventType;
  /** The resource the event is about, as the API presents it. */
  data: Record<string, unknown>;
  /** The profile whose activity this is (profile events): endpoints subscribed to others skip it. */
  profileId?: string;
}

/**
 * The transactional outbox. A product says what happened with `emit`, inside the transaction of the
 * change: the event, and one pending delivery for each of the app's enabled endpoints (same mode)
 * that wants it, commit with the change or not at all; an event no endpoint wants is not kept.
 * Workers deliver them later (modules/webhooks). Emitting is one statement.
 */
export function createOutbox(deps: { clock: Clock }) {
  const listeners: (() => void)[] = [];
  const announceDue = () => {
    for (const listener of listeners) listener();
  };
  const record = async (
    tx: Transaction,
    event: Omit<EventInput, 'type'> & { type: EventType | TestEventType },
    endpoints: ReturnType<typeof sql.fragment>,
  ) => {
    const id = newId('evt');
    const now = deps.clock.now();
    // The exact bytes every attempt sends and signs.
    const body = JSON.stringify({
      id,
      type: event.type,
      created_at: now.toISOString(),
      app_id: event.appId,
      mode: event.mode,
      data: event.data,
    });
    const at = sql.timestamp(now);
    const deliveries = await tx.anyFirst(sql.type(z.object({ id: z.string() }))`
      with endpoints as (
        -- Locked against deletion: an endpoint deleted meanwhile is skipped, not a failed change.
        select e.id from webhook_endpoints e
        where e.app_id = ${event.appId} and e.mode = ${event.mode} and ${endpoints}
        for key share
      ),
      event as (
        -- Only events some endpoint wants are kept: nothing else ever reads them, and most apps
        -- have no endpoint for most of what their users do.
        insert into webhook_events (id, app_id, mode, type, profile_id, body, created_at)
        select ${id}, ${event.appId}, ${event.mode}, ${event.type}, ${event.profileId ?? null}, ${body}, ${at}
        where exists (select from endpoints)
        returning id
      )
      insert into webhook_deliveries (id, event_id, endpoint_id, status, next_attempt_at, created_at)
      select 'whd_' || replace(gen_random_uuid()::text, '-', ''), event.id, endpoints.id, 'pending', ${at}, ${at}
      from event, endpoints
      returning id`);
    if (deliveries.length > 0) tx.afterCommit(async () => announceDue());
    // The id names an event only where some endpoint wanted it (deliveries made).
    return { id, deliveryIds: deliveries };
  };
  return {
    emit: (tx: Transaction, event: EventInput) =>
      record(
        tx,
        event,
        sql.fragment`e.enabled and ${event.type} = any(e.event_types)
          and (e.profile_ids is null or ${event.profileId ?? null}::text is null
               or ${event.profileId ?? null} = any(e.profile_ids))`,
      ),
    /** The test button's `ping`, to one endpoint, enabled or not: the app checks it before enabling. */
    ping: (tx: Transaction, appId: string, mode: KeyMode, endpointId: string) =>
      record(
        tx,
        { appId, mode, type: 'ping', data: { endpoint_id: endpointId } },
        sql.fragment`e.id = ${endpointId}`,
      ),
    /** Deliveries are due now (an emit's commit, a redelivery): a local worker starts on them at once. */
    announceDue,
    onDue: (listener: () => void) => void listeners.push(listener),
  };
}

export type Outbox = ReturnType<typeof createOutbox>;
