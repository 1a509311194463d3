import { randomUUID } from 'node:crypto';
import { type FragmentSqlToken, sql } from 'slonik';
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

/** The row of a statement carrying an event: the deliveries it made (`EventInStatement.deliveries`). */
export const DeliveriesMade = z.object({ deliveries: z.number().int() });

/** An event whose change is made by one statement, to go in that statement (see `inStatement`). */
export interface EventInStatement {
  /**
   * Its parts, emitted when the statement's CTE `cte` holds a row (at most one: the change made, or
   * none when it was not, and then nothing is locked either), each hole of its data filled from
   * `fill` (an expression over `cte`, each hole a whole value of the data: it becomes the JSON of the
   * expression's type, a string for text, a number for a count): CTEs for the statement's WITH list,
   * after its own, and an int expression counting the deliveries made.
   */
  over(
    cte: string,
    fill?: Record<string, FragmentSqlToken>,
  ): { ctes: FragmentSqlToken; deliveries: FragmentSqlToken };
  /** Takes the statement's count of deliveries: the local worker hears of them once the change commits. */
  made(tx: Transaction, deliveries: number): void;
}

/**
 * The parts of a statement's event when it may have none: its CTEs after the statement's own (with
 * their comma, or nothing) and its count of deliveries (or 0).
 */
export function eventPartsIfAny(event: EventInStatement | undefined, cte: string) {
  const parts = event?.over(cte);
  return {
    moreCtes: parts ? sql.fragment`, ${parts.ctes}` : sql.fragment``,
    deliveries: parts?.deliveries ?? sql.fragment`0`,
  };
}

/**
 * The transactional outbox. A product says what happened with `emit`, inside the transaction of the
 * change: the event, and one pending delivery for each of the app's enabled endpoints (same mode)
 * that wants it, commit with the change or not at all; an event no endpoint wants is not kept.
 * Workers deliver them later (modules/webhooks). Emitting is one statement, or none of its own: a
 * change made by one statement can carry its event in that statement (`inStatement`).
 */
export function createOutbox(deps: { clock: Clock }) {
  const listeners: (() => void)[] = [];
  const announceDue = () => {
    for (const listener of listeners) listener();
  };
  // Holes in an event's data are marked with this process's own random text, which no app's data
  // can hold by chance or design.
  const holeMark = `hole-${randomUUID()}`;
  const hole = (name: string) => `${holeMark}:${name}`;

  const wants = (event: EventInput) =>
    sql.fragment`e.enabled and ${event.type} = any(e.event_types)
      and (e.profile_ids is null or ${event.profileId ?? null}::text is null
           or ${event.profileId ?? null} = any(e.profile_ids))`;

  /**
   * The event's CTEs: the endpoints that want it (none when `from`, the change's CTE, is given and
   * empty), the event if there is one, and a delivery for each of them. `from` holds one row at most:
   * the event's id is one.
   */
  function eventCtes(
    event: Omit<EventInput, 'type'> & { type: EventType | TestEventType },
    endpoints: FragmentSqlToken,
    from?: { cte: string; fill: Record<string, FragmentSqlToken> },
  ) {
    const id = newId('evt');
    const now = deps.clock.now();
    // The exact bytes every attempt sends and signs; a hole's value is its JSON text, put in by SQL.
    const template = JSON.stringify({
      id,
      type: event.type,
      created_at: now.toISOString(),
      app_id: event.appId,
      mode: event.mode,
      data: event.data,
    });
    const fills = Object.entries(from?.fill ?? {});
    // A hole left unfilled would send this process's mark; a fill without its hole would do nothing.
    if (
      template.split(holeMark).length - 1 !== fills.length ||
      fills.some(([name]) => !template.includes(JSON.stringify(hole(name))))
    )
      throw new Error(
        `an event's holes and fills differ: ${fills.map(([name]) => name).join(', ') || 'no fills'}`,
      );
    const body = fills.reduce<FragmentSqlToken>(
      (text, [name, value]) =>
        sql.fragment`replace(${text}, ${JSON.stringify(hole(name))}, to_json(${value})::text)`,
      sql.fragment`${template}::text`,
    );
    const at = sql.timestamp(now);
    return {
      id,
      ctes: sql.fragment`
        outbox_endpoints as (
          select e.id from webhook_endpoints e
          where e.app_id = ${event.appId} and e.mode = ${event.mode} and e.deleted_at is null and ${endpoints}
            ${from ? sql.fragment`and exists (select from ${sql.identifier([from.cte])})` : sql.fragment``}
          -- Locked against deletion: an endpoint deleted meanwhile is skipped, not a failed change.
          for key share
        ),
        outbox_event as (
          -- Only events some endpoint wants are kept: nothing else ever reads them, and most apps
          -- have no endpoint for most of what their users do.
          insert into webhook_events (id, app_id, mode, type, profile_id, body, created_at)
          select ${id}, ${event.appId}, ${event.mode}, ${event.type}, ${event.profileId ?? null}, ${body}, ${at}
          -- From the change's CTE (when given): the body's fills read its columns.
          ${from ? sql.fragment`from ${sql.identifier([from.cte])}` : sql.fragment``}
          where exists (select from outbox_endpoints)
          returning id
        ),
        outbox_deliveries as (
          insert into webhook_deliveries (id, event_id, endpoint_id, status, created_at)
          select 'whd_' || replace(gen_random_uuid()::text, '-', ''), outbox_event.id, outbox_endpoints.id,
                 'pending', ${at}
          from outbox_event, outbox_endpoints
          returning id, endpoint_id
        ),
        outbox_due as (
          insert into webhook_due (delivery_id, endpoint_id, due_at, created_at, ping)
          select id, endpoint_id, ${at}, ${at}, ${event.type === 'ping'} from outbox_deliveries
        )`,
    };
  }

  const made = (tx: Transaction, deliveries: number) => {
    if (deliveries > 0) tx.afterCommit(async () => announceDue());
  };

  const record = async (
    tx: Transaction,
    event: Omit<EventInput, 'type'> & { type: EventType | TestEventType },
    endpoints: FragmentSqlToken,
  ) => {
    const { id, ctes } = eventCtes(event, endpoints);
    const deliveryIds = await tx.anyFirst(
      sql.type(z.object({ id: z.string() }))`with ${ctes} select id from outbox_deliveries`,
    );
    made(tx, deliveryIds.length);
    // The id names an event only where some endpoint wanted it (deliveries made).
    return { id, deliveryIds };
  };

  return {
    emit: (tx: Transaction, event: EventInput) => record(tx, event, wants(event)),
    /**
     * The event of a change that one statement makes, to go in that statement: one round trip for
     * both. A value only the statement knows goes in the data as `hole(name)`, for the statement to fill.
     */
    inStatement: (event: EventInput): EventInStatement => ({
      over: (cte, fill = {}) => ({
        ctes: eventCtes(event, wants(event), { cte, fill }).ctes,
        deliveries: sql.fragment`(select count(*) from outbox_deliveries)::int`,
      }),
      made,
    }),
    hole,
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
