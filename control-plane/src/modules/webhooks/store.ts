import { type SqlToken, sql } from 'slonik';
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

/**
 * A delivery (`d`) still held by the claim that ends `until`: its next_attempt_at is that end, which
 * only a pending delivery has (the table's check). Said no more than that: with `status = 'pending'`
 * the planner may walk the partial due index, every due row against every claim, which it estimates
 * as one row while the table is young (52 ms to record 56 attempts with 1,833 due, instead of looking
 * each one up by its id).
 */
const stillClaimed = (until: SqlToken) => sql.fragment`d.next_attempt_at = ${until}`;

/** A claimed delivery with what its attempt needs. */
export const ClaimedRow = z.object({
  id: z.string(),
  event_id: z.string(),
  event_type: z.string(),
  endpoint_id: z.string(),
  failures: z.number().int(),
  body: z.string(),
  app_id: z.string(),
  mode: z.enum(['live', 'test']),
});
export type ClaimedRow = z.infer<typeof ClaimedRow>;

/** What an attempt reads of its endpoint when it starts. */
export const EndpointState = z.object({
  url: z.string(),
  secret_sealed: z.instanceof(Buffer),
  enabled: z.boolean(),
});
export type EndpointState = z.infer<typeof EndpointState>;

/** A claimed delivery, known by its claim: writes about it apply only while the claim is its. */
export interface Claim {
  id: string;
  claimedUntil: Date;
}

/** A successful attempt, waiting to be recorded with others. */
export interface SuccessRecord {
  deliveryId: string;
  claimedUntil: Date;
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

    /**
     * Makes a finished delivery due again now, with a fresh retry schedule; a pending one (perhaps
     * claimed right now) is left alone, so that two redeliveries never send one attempt twice.
     */
    redeliver: (id: string, at: Date) =>
      db.query(sql.unsafe`
        update webhook_deliveries set status = 'pending', failures = 0, next_attempt_at = ${sql.timestamp(at)}
        where id = ${id} and status <> 'pending'`),

    /**
     * Takes up to `limit` due deliveries for this worker until `claimUntil` (another worker takes
     * one again only if this one stopped before recording its attempt), no more of each endpoint
     * than its room (`rooms`; `unseenRoom` for an endpoint not in it), none of the endpoints in
     * `skip`: a slow endpoint cannot fill the worker. Only the first due rows are looked at (twice
     * `limit`, skipped endpoints left out), so a claim costs the same whatever the backlog.
     * A disabled endpoint's deliveries wait (its test pings still go).
     */
    claimDue: (claim: {
      now: Date;
      claimUntil: Date;
      limit: number;
      rooms: ReadonlyMap<string, number>;
      unseenRoom: number;
      skip: readonly string[];
    }) => {
      const now = sql.timestamp(claim.now);
      return db.any(sql.type(ClaimedRow)`
        with candidates as materialized (
          select ranked.id, ranked.next_attempt_at from (
            select d.id, d.endpoint_id, d.next_attempt_at,
                   row_number() over (partition by d.endpoint_id order by d.next_attempt_at) as rank
            from (
              select d.id, d.endpoint_id, d.next_attempt_at
              from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id
              where d.status = 'pending' and d.next_attempt_at <= ${now}
                -- Past the events' retention a delivery is about to go with its event: never sent.
                and d.created_at > ${now} - make_interval(days => ${EVENT_RETENTION_DAYS})
                and d.endpoint_id <> all(${sql.array(claim.skip, 'text')})
                -- A disabled endpoint keeps its deliveries for when it is enabled; only its pings go.
                -- (Before the limit: waiting deliveries must never fill the rows looked at.)
                and (e.enabled or exists (select 1 from webhook_events ev where ev.id = d.event_id and ev.type = 'ping'))
              order by d.next_attempt_at
              limit ${claim.limit * 2}
            ) d
          ) ranked
          left join unnest(${sql.array([...claim.rooms.keys()], 'text')},
                           ${sql.array([...claim.rooms.values()], 'int4')}) as rooms (endpoint_id, room)
            using (endpoint_id)
          where ranked.rank <= coalesce(rooms.room, ${claim.unseenRoom})
        ),
        due as (
          -- Said again on the locked row: a row another worker claimed since this statement's
          -- snapshot is checked again in its new version, and skipped.
          -- Each candidate looked up by its id. Pending is said as neither end, which the due index
          -- (partial on pending) cannot serve: a plan through it walks the due rows for each candidate,
          -- or tests every due row against all of them (twice the claim's time, for a claim of 512).
          -- Locked in due order until the limit: rows other workers are claiming are skipped, and the
          -- next candidates take their place.
          select d.id from candidates c join webhook_deliveries d on d.id = c.id
          where d.status not in ('succeeded', 'failed') and d.next_attempt_at <= ${now}
          order by c.next_attempt_at
          limit ${claim.limit}
          for update of d skip locked
        ),
        claimed as (
          update webhook_deliveries d set next_attempt_at = ${sql.timestamp(claim.claimUntil)}
          from due where d.id = due.id
          returning d.id, d.event_id, d.endpoint_id, d.failures
        )
        select claimed.*, ev.type as event_type, ev.body, e.app_id, e.mode
        from claimed
        join webhook_events ev on ev.id = claimed.event_id
        join webhook_endpoints e on e.id = claimed.endpoint_id`);
    },

    endpointState: (id: string) =>
      db.maybeOne(
        sql.type(EndpointState)`select url, secret_sealed, enabled from webhook_endpoints where id = ${id}`,
      ),

    /**
     * Gives claimed deliveries back, due now (a worker that stops before sending them, an endpoint
     * disabled meanwhile); one another worker took since is left alone.
     */
    releaseClaims: (claims: readonly Claim[], now: Date) =>
      db.query(sql.unsafe`
        update webhook_deliveries d set next_attempt_at = ${sql.timestamp(now)}
        from ${sql.unnest(
          claims.map((claim) => [claim.id, claim.claimedUntil.toISOString()]),
          ['text', 'timestamptz'],
        )} as released (id, claimed_until)
        where d.id = released.id and ${stillClaimed(sql.fragment`released.claimed_until`)}`),

    /**
     * Records successful attempts together, in one statement: each delivery done, its attempt, and
     * the failing streak of their endpoints ended (written only where there was one, so that
     * successes to a healthy endpoint never queue on its row). A delivery no longer held by its claim
     * (deleted, or taken by another worker after the claim lapsed) is left as it is.
     */
    recordSuccesses: (records: readonly SuccessRecord[]) =>
      db.query(sql.unsafe`
        with done as (
          select * from ${sql.unnest(
            records.map((r) => [
              r.deliveryId,
              r.claimedUntil.toISOString(),
              r.at.toISOString(),
              r.statusCode,
              r.latencyMs,
              r.excerpt,
            ]),
            ['text', 'timestamptz', 'timestamptz', 'int4', 'int4', 'text'],
          )} as done (delivery_id, claimed_until, attempted_at, status_code, latency_ms, response_excerpt)
        ),
        deliveries as (
          update webhook_deliveries d set status = 'succeeded', next_attempt_at = null
          from done
          where d.id = done.delivery_id and ${stillClaimed(sql.fragment`done.claimed_until`)}
          returning d.id, d.endpoint_id
        ),
        attempts as (
          insert into webhook_attempts (delivery_id, attempted_at, status_code, latency_ms, response_excerpt)
          select done.delivery_id, done.attempted_at, done.status_code, done.latency_ms, done.response_excerpt
          from done join deliveries on deliveries.id = done.delivery_id
        )
        update webhook_endpoints set failing_since = null
        where id in (select endpoint_id from deliveries) and failing_since is not null`),

    /**
     * Records a failed attempt and what follows from it, in one statement: the delivery failed for
     * good (no `nextAttemptAt`) or waits for its retry; the endpoint's failing streak goes on.
     * Returns since when the endpoint has been failing, or nothing when the delivery is no longer
     * held by its claim (deleted, or taken by another worker after the claim lapsed).
     */
    recordFailure: (attempt: {
      deliveryId: string;
      claimedUntil: Date;
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
          with delivery as (
            update webhook_deliveries d
            set status = ${attempt.nextAttemptAt ? 'pending' : 'failed'}, failures = d.failures + 1,
                next_attempt_at = ${attempt.nextAttemptAt ? sql.timestamp(attempt.nextAttemptAt) : null}
            where d.id = ${attempt.deliveryId} and ${stillClaimed(sql.timestamp(attempt.claimedUntil))}
            returning d.id
          ),
          attempt as (
            insert into webhook_attempts (delivery_id, attempted_at, status_code, failure, latency_ms, response_excerpt)
            select id, ${sql.timestamp(attempt.at)}, ${attempt.statusCode}, ${attempt.failure},
                   ${attempt.latencyMs}, ${attempt.excerpt}
            from delivery
          )
          update webhook_endpoints set failing_since = coalesce(failing_since, ${sql.timestamp(attempt.at)})
          where id = ${attempt.endpointId} and exists (select 1 from delivery)
          returning failing_since`,
      ),

    /** Disables an endpoint that kept failing, unless something changed it meanwhile. */
    disableFailing: (id: string, failingBefore: Date, at: Date) =>
      db.maybeOne(sql.type(EndpointRow)`
        update webhook_endpoints set enabled = false, disabled_reason = 'failing', updated_at = ${sql.timestamp(at)}
        where id = ${id} and enabled and failing_since <= ${sql.timestamp(failingBefore)}
        returning ${endpointColumns}`),

    /** Up to `limit` events made before `before`, with their deliveries and attempts. */
    pruneEvents: async (before: Date, limit: number) =>
      (
        await db.query(sql.unsafe`
          delete from webhook_events
          where id in (select id from webhook_events where created_at < ${sql.timestamp(before)} limit ${limit})`)
      ).rowCount,
  };
}
