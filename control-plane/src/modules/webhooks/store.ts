import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import { AttemptRow, DeliveryRow, EndpointRow, EVENT_RETENTION_DAYS } from './schema.js';

const endpointColumns = sql.fragment`
  id, app_id, mode, url, description, event_types, profile_ids, enabled, disabled_reason, secret_hint,
  failing_since, created_at, updated_at`;

const deliveryColumns = sql.fragment`
  d.id, d.event_id, ev.type as event_type, d.endpoint_id, d.status, d.failures, d.next_attempt_at, d.created_at,
  (select count(*) from webhook_attempts a where a.delivery_id = d.id)::int as attempt_count`;

const attemptColumns = sql.fragment`
  delivery_id, attempted_at, status_code, failure, latency_ms, response_excerpt`;

const after = (position: Position | undefined, alias = sql.fragment``) =>
  position
    ? sql.fragment`and (${alias}created_at, ${alias}id) < (${sql.timestamp(position.createdAt)}, ${position.id})`
    : sql.fragment``;

/** A claimed delivery with what its attempt needs. */
export const ClaimedRow = z.object({
  id: z.string(),
  event_id: z.string(),
  endpoint_id: z.string(),
  failures: z.number().int(),
  body: z.string(),
  url: z.string(),
  secret_sealed: z.instanceof(Buffer),
  app_id: z.string(),
  mode: z.enum(['live', 'test']),
});
export type ClaimedRow = z.infer<typeof ClaimedRow>;

/** A successful attempt, waiting to be recorded with others. */
export interface SuccessRecord {
  deliveryId: string;
  endpointId: string;
  at: Date;
  statusCode: number;
  latencyMs: number;
  excerpt: string;
}

export interface EndpointFields {
  url: string;
  description: string;
  eventTypes: readonly string[];
  profileIds: readonly string[] | null;
  enabled: boolean;
}

/** SQL of webhook endpoints, deliveries and attempts (events are written by the outbox). */
export function webhooksStore(db: Db) {
  return {
    countEndpoints: (appId: string, mode: KeyMode) =>
      db.oneFirst(
        sql.type(z.object({ count: z.number().int() }))`
          select count(*)::int as count from webhook_endpoints where app_id = ${appId} and mode = ${mode}`,
      ),

    /** Serialises the endpoint limit check and the creation of one app's endpoints in a mode. */
    lockEndpoints: (appId: string, mode: KeyMode) =>
      db.query(sql.unsafe`select pg_advisory_xact_lock(hashtext(${`webhooks:${appId}:${mode}`}))`),

    insertEndpoint: (
      row: EndpointFields & {
        id: string;
        appId: string;
        mode: KeyMode;
        secretSealed: Buffer;
        secretHint: string;
        at: Date;
      },
    ) =>
      db.one(sql.type(EndpointRow)`
        insert into webhook_endpoints (id, app_id, mode, url, description, event_types, profile_ids, enabled,
                                       secret_sealed, secret_hint, created_at, updated_at)
        values (${row.id}, ${row.appId}, ${row.mode}, ${row.url}, ${row.description},
                ${sql.array(row.eventTypes, 'text')},
                ${row.profileIds ? sql.array(row.profileIds, 'text') : null},
                ${row.enabled}, ${sql.binary(row.secretSealed)}, ${row.secretHint},
                ${sql.timestamp(row.at)}, ${sql.timestamp(row.at)})
        returning ${endpointColumns}`),

    /** An endpoint as its own app sees it in one mode: any other app or mode finds nothing. */
    findEndpoint: (id: string, appId: string, mode: KeyMode) =>
      db.maybeOne(sql.type(EndpointRow)`
        select ${endpointColumns} from webhook_endpoints where id = ${id} and app_id = ${appId} and mode = ${mode}`),

    endpointPage: (filter: { appId: string; mode: KeyMode; limit: number; after?: Position }) =>
      db.any(sql.type(EndpointRow)`
        select ${endpointColumns} from webhook_endpoints
        where app_id = ${filter.appId} and mode = ${filter.mode} ${after(filter.after)}
        order by created_at desc, id desc
        limit ${filter.limit}`),

    /** Writes the endpoint's fields; enabling it clears why the service disabled it. */
    updateEndpoint: (id: string, fields: EndpointFields, at: Date) =>
      db.one(sql.type(EndpointRow)`
        update webhook_endpoints
        set url = ${fields.url}, description = ${fields.description},
            event_types = ${sql.array(fields.eventTypes, 'text')},
            profile_ids = ${fields.profileIds ? sql.array(fields.profileIds, 'text') : null},
            enabled = ${fields.enabled},
            disabled_reason = case when ${fields.enabled} then null else disabled_reason end,
            failing_since = case when ${fields.enabled} and not enabled then null else failing_since end,
            updated_at = ${sql.timestamp(at)}
        where id = ${id}
        returning ${endpointColumns}`),

    replaceSecret: (id: string, sealed: Buffer, hint: string, at: Date) =>
      db.one(sql.type(EndpointRow)`
        update webhook_endpoints set secret_sealed = ${sql.binary(sealed)}, secret_hint = ${hint},
                                     updated_at = ${sql.timestamp(at)}
        where id = ${id}
        returning ${endpointColumns}`),

    deleteEndpoint: (id: string) => db.query(sql.unsafe`delete from webhook_endpoints where id = ${id}`),

    deliveryPage: (filter: {
      endpointId: string;
      limit: number;
      status?: 'pending' | 'succeeded' | 'failed';
      after?: Position;
    }) =>
      db.any(sql.type(DeliveryRow)`
        select ${deliveryColumns}
        from webhook_deliveries d join webhook_events ev on ev.id = d.event_id
        where d.endpoint_id = ${filter.endpointId}
          ${filter.status ? sql.fragment`and d.status = ${filter.status}` : sql.fragment``}
          ${after(filter.after, sql.fragment`d.`)}
        order by d.created_at desc, d.id desc
        limit ${filter.limit}`),

    findDelivery: (id: string, endpointId: string) =>
      db.maybeOne(sql.type(DeliveryRow)`
        select ${deliveryColumns}
        from webhook_deliveries d join webhook_events ev on ev.id = d.event_id
        where d.id = ${id} and d.endpoint_id = ${endpointId}`),

    /** The newest attempts of each delivery, up to `perDelivery` each, newest first. */
    attempts: (deliveryIds: readonly string[], perDelivery: number) =>
      db.any(sql.type(AttemptRow)`
        select ${attemptColumns} from (
          select *, row_number() over (partition by delivery_id order by id desc) as rank
          from webhook_attempts where delivery_id = any(${sql.array(deliveryIds, 'text')})
        ) ranked
        where rank <= ${perDelivery}
        order by id desc`),

    /** Makes a delivery due again now, with a fresh retry schedule. */
    redeliver: (id: string, at: Date) =>
      db.query(sql.unsafe`
        update webhook_deliveries set status = 'pending', failures = 0, next_attempt_at = ${sql.timestamp(at)}
        where id = ${id}`),

    /**
     * Takes up to `limit` due deliveries for this worker until `claimUntil` (another worker takes
     * one again only if this one stopped before recording its attempt), no more of each endpoint
     * than `perEndpoint` less what the worker already holds of it (`held`), none of the endpoints in
     * `skip`: a slow endpoint cannot fill the worker. Only the first due rows are looked at (twice
     * `limit`, skipped endpoints left out), so a claim costs the same whatever the backlog.
     * A disabled endpoint's deliveries wait (its test pings still go).
     */
    claimDue: (claim: {
      now: Date;
      claimUntil: Date;
      limit: number;
      perEndpoint: number;
      held: ReadonlyMap<string, number>;
      skip: readonly string[];
    }) => {
      const now = sql.timestamp(claim.now);
      return db.any(sql.type(ClaimedRow)`
        with candidates as materialized (
          select ranked.id from (
            select d.id, d.endpoint_id,
                   row_number() over (partition by d.endpoint_id order by d.next_attempt_at) as rank
            from (
              select id, endpoint_id, event_id, next_attempt_at from webhook_deliveries
              where status = 'pending' and next_attempt_at <= ${now}
                -- Past the events' retention a delivery is about to go with its event: never sent.
                and created_at > ${now} - make_interval(days => ${EVENT_RETENTION_DAYS})
                and endpoint_id <> all(${sql.array(claim.skip, 'text')})
              order by next_attempt_at
              limit ${claim.limit * 2}
            ) d
            join webhook_endpoints e on e.id = d.endpoint_id
            -- A disabled endpoint keeps its deliveries for when it is enabled; only its pings go.
            where e.enabled or exists (select 1 from webhook_events ev where ev.id = d.event_id and ev.type = 'ping')
          ) ranked
          left join unnest(${sql.array([...claim.held.keys()], 'text')},
                           ${sql.array([...claim.held.values()], 'int4')}) as holding (endpoint_id, count)
            using (endpoint_id)
          where ranked.rank <= ${claim.perEndpoint} - coalesce(holding.count, 0)
        ),
        due as (
          -- Said again on the locked row: a row another worker claimed since this statement's
          -- snapshot is checked again in its new version, and skipped.
          -- Looked up by id (an array, so that the plan never scans the due rows per candidate).
          select id from webhook_deliveries
          where id = any(array(select id from candidates))
            and status = 'pending' and next_attempt_at <= ${now}
          order by next_attempt_at
          limit ${claim.limit}
          for update skip locked
        ),
        claimed as (
          update webhook_deliveries d set next_attempt_at = ${sql.timestamp(claim.claimUntil)}
          from due where d.id = due.id
          returning d.id, d.event_id, d.endpoint_id, d.failures
        )
        select claimed.*, ev.body, e.url, e.secret_sealed, e.app_id, e.mode
        from claimed
        join webhook_events ev on ev.id = claimed.event_id
        join webhook_endpoints e on e.id = claimed.endpoint_id`);
    },

    /** Gives claimed deliveries back, due now (a worker that stops before sending them). */
    releaseClaims: (ids: readonly string[], now: Date) =>
      db.query(sql.unsafe`
        update webhook_deliveries set next_attempt_at = ${sql.timestamp(now)}
        where id = any(${sql.array(ids, 'text')}) and status = 'pending'`),

    /**
     * Records successful attempts together, in one statement: each attempt, its delivery done, and
     * the failing streak of their endpoints ended (written only where there was one, so that
     * successes to a healthy endpoint never queue on its row). Deliveries deleted meanwhile are
     * skipped.
     */
    recordSuccesses: (records: readonly SuccessRecord[]) =>
      db.query(sql.unsafe`
        with done as (
          select * from ${sql.unnest(
            records.map((r) => [
              r.deliveryId,
              r.endpointId,
              r.at.toISOString(),
              r.statusCode,
              r.latencyMs,
              r.excerpt,
            ]),
            ['text', 'text', 'timestamptz', 'int4', 'int4', 'text'],
          )} as done (delivery_id, endpoint_id, attempted_at, status_code, latency_ms, response_excerpt)
        ),
        attempts as (
          insert into webhook_attempts (delivery_id, attempted_at, status_code, latency_ms, response_excerpt)
          select done.delivery_id, done.attempted_at, done.status_code, done.latency_ms, done.response_excerpt
          from done join webhook_deliveries d on d.id = done.delivery_id
        ),
        deliveries as (
          update webhook_deliveries d set status = 'succeeded', next_attempt_at = null
          from done where d.id = done.delivery_id
        )
        update webhook_endpoints set failing_since = null
        where id in (select endpoint_id from done) and failing_since is not null`),

    /**
     * Records a failed attempt and what follows from it, in one statement: the delivery failed for
     * good (no `nextAttemptAt`) or waits for its retry; the endpoint's failing streak goes on.
     * Returns since when the endpoint has been failing, or nothing when the endpoint or its
     * delivery was deleted meanwhile.
     */
    recordFailure: (attempt: {
      deliveryId: string;
      endpointId: string;
      at: Date;
      statusCode: number | null;
      failure: string | null;
      latencyMs: number;
      excerpt: string;
      nextAttemptAt: Date | null;
    }) =>
      db.maybeOneFirst(
        sql.type(z.object({ failing_since: z.date() }))`
          with attempt as (
            insert into webhook_attempts (delivery_id, attempted_at, status_code, failure, latency_ms, response_excerpt)
            select id, ${sql.timestamp(attempt.at)}, ${attempt.statusCode}, ${attempt.failure},
                   ${attempt.latencyMs}, ${attempt.excerpt}
            from webhook_deliveries where id = ${attempt.deliveryId}
          ),
          delivery as (
            update webhook_deliveries
            set status = ${attempt.nextAttemptAt ? 'pending' : 'failed'}, failures = failures + 1,
                next_attempt_at = ${attempt.nextAttemptAt ? sql.timestamp(attempt.nextAttemptAt) : null}
            where id = ${attempt.deliveryId}
          )
          update webhook_endpoints set failing_since = coalesce(failing_since, ${sql.timestamp(attempt.at)})
          where id = ${attempt.endpointId}
          returning failing_since`,
      ),

    /** Disables an endpoint that kept failing, unless something changed it meanwhile. */
    disableFailing: (id: string, failingBefore: Date, at: Date) =>
      db.maybeOne(sql.type(EndpointRow)`
        update webhook_endpoints set enabled = false, disabled_reason = 'failing', updated_at = ${sql.timestamp(at)}
        where id = ${id} and enabled and failing_since <= ${sql.timestamp(failingBefore)}
        returning ${endpointColumns}`),

    /** Events past their retention, with their deliveries and attempts. */
    pruneEvents: async (now: Date) =>
      (
        await db.query(sql.unsafe`
          delete from webhook_events
          where created_at < ${sql.timestamp(now)} - make_interval(days => ${EVENT_RETENTION_DAYS})`)
      ).rowCount,
  };
}
