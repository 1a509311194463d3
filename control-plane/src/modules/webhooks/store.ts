import { type SqlToken, sql, type ValueExpression } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import { AttemptRow, DeliveryRow, EndpointRow, EVENT_RETENTION_DAYS } from './schema.js';

const endpointColumns = sql.fragment`
  id, app_id, mode, url, description, event_types, profile_ids, enabled, disabled_reason, secret_hint,
  failing_since, created_at, updated_at`;

const deliveryColumns = sql.fragment`
  d.id, d.event_id, ev.type as event_type, d.endpoint_id, d.status, d.failures,
  (select q.due_at from webhook_due q where q.delivery_id = d.id) as next_attempt_at, d.created_at,
  (select count(*) from webhook_attempts a where a.delivery_id = d.id)::int as attempt_count`;

const attemptColumns = sql.fragment`
  delivery_id, attempted_at, status_code, failure, latency_ms, response_excerpt`;

const after = (position: Position | undefined, alias = sql.fragment``) =>
  position
    ? sql.fragment`and (${alias}created_at, ${alias}id) < (${sql.timestamp(position.createdAt)}, ${position.id})`
    : sql.fragment``;

/** Endpoints with something to send that a claim looks for, beyond those the worker names. */
const ENDPOINTS_EXPLORED = 1_000;
/** Endpoints with queued deliveries a claim looks through at most to find them (3 index probes each). */
const ENDPOINTS_WALKED = 20_000;

/**
 * Queue rows (`q`) still held by these claims: each looked for at the address its claim left it (a
 * TID scan), and taken only when its id and due time are the claim's own. Every write to a queue row
 * moves it, so the address finds nothing once the row was claimed again or given back: except while
 * this statement runs, when it waits for the row that another worker's claim is changing and then
 * reads that worker's version, which only the id and end check refuse (not every PostgreSQL release
 * rechecks a TID scan's addresses on such a version). The check also refuses another row that has
 * come to sit at an address vacuumed free. Neither a join with the claims nor a lookup by id: the
 * queue is empty between bursts, its statistics say so, and a planner that believes them scans the
 * whole queue, testing each row against every claim: after an idle spell, a join took 1.2 s to
 * record 93 successes behind a backlog of 20,000, and a lookup by id 131-218 ms to record 256
 * (bench/webhook-claims.ts; by address 11-12 ms, as once the queue is analyzed).
 */
function stillHeld(given: readonly Claim[]) {
  // One claim per address, the latest: a claim's address may have been freed and reused by a later
  // claim of the same batch, and array_position finds only an address's first claim.
  const latest = new Map<string, Claim>();
  for (const claim of given) {
    const known = latest.get(claim.address);
    if (!known || known.claimedUntil < claim.claimedUntil) latest.set(claim.address, claim);
  }
  const claims = [...latest.values()];
  const addresses = sql.array(
    claims.map((claim) => claim.address),
    'tid',
  );
  const ids = sql.array(
    claims.map((claim) => claim.id),
    'text',
  );
  const ends = sql.array(
    claims.map((claim) => claim.claimedUntil.toISOString()),
    'timestamptz',
  );
  return sql.fragment`q.ctid = any(${addresses})
    and q.delivery_id = (${ids})[array_position(${addresses}, q.ctid)]
    and q.due_at = (${ends})[array_position(${addresses}, q.ctid)]`;
}

/**
 * The claims' endpoints (shared: recording never changes their keys) and then their deliveries,
 * each in id order, locked before anything of their queue rows (a CTE for the statement to read
 * first, `locked`). A deletion takes the same order: the endpoint, its deliveries (the foreign key's
 * cascade), then their queue rows and attempts (the trigger); a record that took a queue row or a
 * delivery first could wait for it while it waited for the record.
 */
function lockDeliveries(claims: readonly Claim[], endpointIds: readonly string[]) {
  return sql.fragment`locked_endpoints as (
    select id from webhook_endpoints where id = any(${sql.array([...new Set(endpointIds)], 'text')})
    order by id
    for key share
  ),
  locked as (
    select id from webhook_deliveries
    where id = any(${sql.array(
      claims.map((claim) => claim.id),
      'text',
    )})
      and endpoint_id = any(array(select id from locked_endpoints))
    order by id
    for no key update
  )`;
}

/** Of the queue rows (`q`), those of the deliveries `locked` holds: read first, as an InitPlan. */
const ofLocked = sql.fragment`q.delivery_id = any(array(select id from locked))`;

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
  /** Where the claim left the delivery's queue row: writes about the claim find it there. */
  address: z.string(),
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
  /** The queue row's address (ctid) after the claim. */
  address: string;
}

/** A successful attempt, waiting to be recorded with others. */
export interface SuccessRecord {
  claim: Claim;
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
          select count(*)::int as count from webhook_endpoints
          where app_id = ${appId} and mode = ${mode} and deleted_at is null`,
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
        select ${endpointColumns} from webhook_endpoints
        where id = ${id} and app_id = ${appId} and mode = ${mode} and deleted_at is null`),

    endpointPage: (filter: { appId: string; mode: KeyMode; limit: number; after?: Position }) =>
      db.any(sql.type(EndpointRow)`
        select ${endpointColumns} from webhook_endpoints
        where app_id = ${filter.appId} and mode = ${filter.mode} and deleted_at is null ${after(filter.after)}
        order by created_at desc, id desc
        limit ${filter.limit}`),

    /**
     * Writes the fields given and no other, so that a change never undoes one made meanwhile (the
     * service disabling a failing endpoint, another change); enabling it clears why the service
     * disabled it and its failures. Nothing, for an endpoint deleted meanwhile.
     */
    updateEndpoint: (id: string, fields: Partial<EndpointFields>, at: Date) => {
      const given = <T>(value: T | undefined, column: string, as: (value: T) => ValueExpression) =>
        value === undefined ? sql.identifier([column]) : as(value);
      return db.maybeOne(sql.type(EndpointRow)`
        update webhook_endpoints
        set url = ${given(fields.url, 'url', (url) => url)},
            description = ${given(fields.description, 'description', (text) => text)},
            event_types = ${given(fields.eventTypes, 'event_types', (types) => sql.array(types, 'text'))},
            profile_ids = ${given(fields.profileIds, 'profile_ids', (ids) => (ids ? sql.array(ids, 'text') : null))},
            enabled = ${given(fields.enabled, 'enabled', (enabled) => enabled)},
            disabled_reason = ${fields.enabled === true ? null : sql.identifier(['disabled_reason'])},
            failing_since = ${fields.enabled === true ? null : sql.identifier(['failing_since'])},
            updated_at = ${sql.timestamp(at)}
        where id = ${id} and deleted_at is null
        returning ${endpointColumns}`);
    },

    /** A new sealed secret; nothing, for an endpoint deleted meanwhile. */
    replaceSecret: (id: string, sealed: Buffer, hint: string, at: Date) =>
      db.maybeOne(sql.type(EndpointRow)`
        update webhook_endpoints set secret_sealed = ${sql.binary(sealed)}, secret_hint = ${hint},
                                     updated_at = ${sql.timestamp(at)}
        where id = ${id} and deleted_at is null
        returning ${endpointColumns}`),

    /** Marks the endpoint deleted: nothing sees it any more; the purge takes its rows afterwards. */
    deleteEndpoint: (id: string, at: Date) =>
      db.query(sql.unsafe`
        update webhook_endpoints set deleted_at = ${sql.timestamp(at)}, enabled = false, updated_at = ${sql.timestamp(at)}
        where id = ${id} and deleted_at is null`),

    /**
     * Up to `limit` deliveries of deleted endpoints, with their attempts and queue rows (the trigger).
     * One a worker is recording is skipped for the next batch: taking rows in another order than the
     * record's could deadlock with it.
     */
    purgeDeletedDeliveries: async (deletedBefore: Date, limit: number) =>
      (
        await db.query(sql.unsafe`
          with doomed as (
            select d.id from webhook_endpoints e join webhook_deliveries d on d.endpoint_id = e.id
            where e.deleted_at < ${sql.timestamp(deletedBefore)}
            limit ${limit}
            for update of d skip locked
          )
          delete from webhook_deliveries where id in (select id from doomed)`)
      ).rowCount,

    /** Endpoints deleted before then with no delivery left, and what the cascade still finds (emitted meanwhile). */
    purgeDeletedEndpoints: (deletedBefore: Date) =>
      db.query(sql.unsafe`
        delete from webhook_endpoints e
        where e.deleted_at < ${sql.timestamp(deletedBefore)}
          and not exists (select from webhook_deliveries d where d.endpoint_id = e.id)`),

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
        with delivery as (
          update webhook_deliveries set status = 'pending', failures = 0
          where id = ${id} and status <> 'pending'
          returning id, event_id, endpoint_id, created_at
        )
        insert into webhook_due (delivery_id, endpoint_id, due_at, created_at, ping)
        select delivery.id, delivery.endpoint_id, ${sql.timestamp(at)}, delivery.created_at, ev.type = 'ping'
        from delivery join webhook_events ev on ev.id = delivery.event_id`),

    /**
     * Takes up to `limit` due deliveries for this worker until `claimUntil` (another worker takes
     * one again only if this one stopped before recording its attempt), the first due of each
     * endpoint up to its room (`rooms`; `unseenRoom` for an endpoint not in it), none of the
     * endpoints in `skip`. Each endpoint's due rows are looked up on their own, so an endpoint's
     * backlog never lengthens the claim of another's. The endpoints looked at are those in `rooms`
     * and up to ENDPOINTS_EXPLORED others with something to send, found by walking the endpoints with
     * queued deliveries from `start` on (round the end and back, ENDPOINTS_WALKED at most): from a
     * random start, past those numbers, every endpoint is still reached within a few claims.
     * A disabled endpoint's deliveries wait (its test pings still go). Run it in a transaction.
     */
    claimDue: async (claim: {
      now: Date;
      claimUntil: Date;
      limit: number;
      rooms: ReadonlyMap<string, number>;
      unseenRoom: number;
      skip: readonly string[];
      start: string;
    }) => {
      const now = sql.timestamp(claim.now);
      const due = sql.fragment`q.due_at <= ${now}
        -- Past the events' retention a delivery is about to go with its event: never sent.
        and q.created_at > ${now} - make_interval(days => ${EVENT_RETENTION_DAYS})`;
      // Whether an endpoint has a delivery due that it takes: any when enabled, a ping when disabled.
      const sendable = (endpointId: SqlToken) => sql.fragment`coalesce((
        select case when e.enabled
                    then exists (select from webhook_due q where q.endpoint_id = e.id and ${due})
                    else exists (select from webhook_due q where q.endpoint_id = e.id and q.ping and ${due}) end
        from webhook_endpoints e where e.id = ${endpointId} and e.deleted_at is null), false)`;
      // The queue is empty between bursts and vacuumed so; its statistics then say it holds no row,
      // and a planner believing them reads all of an endpoint's due rows through a bitmap, to sort
      // them, rather than walking its index in due order for the few it takes (130 ms, not 10, for a
      // claim of 393 behind 19,000). Bitmap scans are off for the claim's transaction.
      await db.query(sql.unsafe`set local enable_bitmapscan = off`);
      return db.any(sql.type(ClaimedRow)`
        with recursive walk (id, first, walked, found, sendable) as (
          -- Each step the next endpoint id in the queue (the first once past the end), and whether it
          -- has something to send: endpoints waiting for retries or kept disabled are walked past
          -- without counting towards those a claim looks for.
          select s.id, s.id, 1, sendable::int, sendable from (
            select coalesce((select min(endpoint_id) from webhook_due where endpoint_id > ${claim.start}),
                            (select min(endpoint_id) from webhook_due)) as id
          ) s, lateral (select ${sendable(sql.fragment`s.id`)} as sendable) c
          where s.id is not null
          union all
          select next.id, walk.first, walk.walked + 1, walk.found + c.sendable::int, c.sendable
          from walk, lateral (
            select coalesce((select min(q.endpoint_id) from webhook_due q where q.endpoint_id > walk.id),
                            (select min(q.endpoint_id) from webhook_due q)) as id
          ) next, lateral (select ${sendable(sql.fragment`next.id`)} as sendable) c
          where walk.walked < ${ENDPOINTS_WALKED} and walk.found < ${ENDPOINTS_EXPLORED} and next.id <> walk.first
        ),
        explored as (select id from walk where sendable),
        targets as (
          select e.id, e.enabled, least(coalesce(rooms.room, ${claim.unseenRoom}), ${claim.limit}) as room,
                 case when e.enabled
                      then (select min(q.due_at) from webhook_due q where q.endpoint_id = e.id and ${due})
                      else (select min(q.due_at) from webhook_due q where q.endpoint_id = e.id and q.ping and ${due})
                 end as first_due
          from (
            select id from explored
            union
            select unnest(${sql.array([...claim.rooms.keys()], 'text')})
          ) t
          join webhook_endpoints e on e.id = t.id and e.deleted_at is null
          left join unnest(${sql.array([...claim.rooms.keys()], 'text')},
                           ${sql.array([...claim.rooms.values()], 'int4')}) as rooms (endpoint_id, room)
            on rooms.endpoint_id = t.id
          where t.id <> all(${sql.array(claim.skip, 'text')})
        ),
        chosen as (
          -- The endpoints due first, until their rooms hold twice the limit: many endpoints with
          -- backlogs must not have each one's room read, to take the limit of them all.
          select * from (
            select targets.*, coalesce(sum(room) over (order by first_due, id
                                                       rows between unbounded preceding and 1 preceding), 0) as before
            from targets where first_due is not null
          ) ordered
          where before < ${claim.limit * 2}
        ),
        candidates as (
          -- Locked here, each endpoint's first due rows by its own index: skipped when another worker
          -- is claiming them (the next ones take their place), and the due time said again on a row
          -- claimed since this statement's snapshot, which is then skipped too. Each with its address:
          -- locked, a row stays where it is until this transaction ends.
          select c.due_at, c.address from chosen targets, lateral (
            -- A disabled endpoint keeps its deliveries for when it is enabled; only its pings go, found
            -- by their own index: its backlog is never walked.
            select * from (
              select q.due_at, q.ctid as address from webhook_due q
              where targets.enabled and q.endpoint_id = targets.id and ${due}
              order by q.due_at limit targets.room
              for update skip locked
            ) enabled
            union all
            select * from (
              select q.due_at, q.ctid as address from webhook_due q
              where not targets.enabled and q.ping and q.endpoint_id = targets.id and ${due}
              order by q.due_at limit targets.room
              for update skip locked
            ) pings
          ) c
        ),
        claimable as (select address from candidates order by due_at limit ${claim.limit}),
        claimed as (
          -- By address (a TID scan), not by id: = any of an array the statement makes is not hashed,
          -- so a scan tests each row against every id in turn, and the planner scans the whole queue
          -- when its statistics say it is small (empty between bursts). bench/webhook-claims.ts: a
          -- burst after an idle spell took 217 ms to claim 512 behind 20,000, 9 times the claim once
          -- the queue is analyzed; by address, 0.8-0.95 times. A candidate claimed and given back
          -- since the snapshot has a new address: it waits for the next claim.
          update webhook_due q set due_at = ${sql.timestamp(claim.claimUntil)}
          where q.ctid = any(array(select address from claimable))
          returning q.delivery_id, q.ctid as address
        )
        select d.id, d.event_id, d.endpoint_id, d.failures, ev.type as event_type, ev.body, e.app_id, e.mode,
               claimed.address::text as address
        from claimed
        join webhook_deliveries d on d.id = claimed.delivery_id
        join webhook_events ev on ev.id = d.event_id
        join webhook_endpoints e on e.id = d.endpoint_id`);
    },

    endpointState: (id: string) =>
      db.maybeOne(
        sql.type(EndpointState)`
          select url, secret_sealed, enabled from webhook_endpoints where id = ${id} and deleted_at is null`,
      ),

    /**
     * Gives claimed deliveries back, due now (a worker that stops before sending them, an endpoint
     * disabled meanwhile); one another worker took since is left alone: a claim is known by its end,
     * the queue row's due_at while it holds.
     */
    releaseClaims: (claims: readonly Claim[], now: Date) =>
      db.query(sql.unsafe`
        update webhook_due q set due_at = ${sql.timestamp(now)} where ${stillHeld(claims)}`),

    /**
     * Records successful attempts together, in one statement: each delivery out of the queue and
     * done, its attempt, and the failing streak of their endpoints ended (written only where there
     * was one, so that successes to a healthy endpoint never queue on its row). A delivery no longer
     * held by its claim (deleted, or taken by another worker after the claim lapsed) is left as it is.
     */
    recordSuccesses: (records: readonly SuccessRecord[]) => {
      const claims = records.map((r) => r.claim);
      return db.query(sql.unsafe`
        with done as (
          select * from ${sql.unnest(
            records.map((r) => [r.claim.id, r.at.toISOString(), r.statusCode, r.latencyMs, r.excerpt]),
            ['text', 'timestamptz', 'int4', 'int4', 'text'],
          )} as done (delivery_id, attempted_at, status_code, latency_ms, response_excerpt)
        ),
        ${lockDeliveries(
          claims,
          records.map((r) => r.endpointId),
        )},
        dequeued as (
          delete from webhook_due q
          where ${ofLocked} and ${stillHeld(claims)}
          returning q.delivery_id, q.endpoint_id
        ),
        deliveries as (
          -- Attempts are written for the deliveries updated, and so held until commit: one deleted
          -- meanwhile has none written, and a deletion waits for them and takes them too.
          update webhook_deliveries d set status = 'succeeded'
          from dequeued where d.id = dequeued.delivery_id
          returning d.id, d.endpoint_id
        ),
        attempts as (
          insert into webhook_attempts (delivery_id, attempted_at, status_code, latency_ms, response_excerpt)
          select done.delivery_id, done.attempted_at, done.status_code, done.latency_ms, done.response_excerpt
          from done join deliveries on deliveries.id = done.delivery_id
        )
        update webhook_endpoints set failing_since = null
        where id in (select endpoint_id from deliveries) and failing_since is not null`);
    },

    /**
     * Records a failed attempt and what follows from it, in one statement: the delivery failed for
     * good (out of the queue) or waits for its retry; the endpoint's failing streak goes on.
     * Returns since when the endpoint has been failing, or nothing when the delivery is no longer
     * held by its claim (deleted, or taken by another worker after the claim lapsed).
     */
    recordFailure: (attempt: {
      claim: Claim;
      endpointId: string;
      at: Date;
      statusCode: number | null;
      failure: string | null;
      latencyMs: number;
      excerpt: string;
      nextAttemptAt: Date | null;
    }) => {
      const claims = [attempt.claim];
      const held = sql.fragment`${ofLocked} and ${stillHeld(claims)}`;
      return db.maybeOneFirst(
        sql.type(z.object({ failing_since: z.date() }))`
          with ${lockDeliveries(claims, [attempt.endpointId])},
          queued as (
            ${
              attempt.nextAttemptAt
                ? sql.fragment`update webhook_due q set due_at = ${sql.timestamp(attempt.nextAttemptAt)} where ${held}`
                : sql.fragment`delete from webhook_due q where ${held}`
            }
            returning q.delivery_id
          ),
          delivery as (
            update webhook_deliveries d
            set status = ${attempt.nextAttemptAt ? 'pending' : 'failed'}, failures = d.failures + 1
            from queued where d.id = queued.delivery_id
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
      );
    },

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
