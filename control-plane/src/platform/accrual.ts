import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { type DatabasePool, ForeignKeyIntegrityConstraintViolationError, sql } from 'slonik';
import { pipelined, redisScript } from '../adapters/redis.js';
import type { KeyMode, Payer } from './caller.js';
import { type Clock, utcDay } from './clock.js';
import type { Metering, Usage, UsagePrice } from './metering.js';
import { metricKey } from './price-catalogue.js';
import type { Prices } from './prices.js';
import { pruneInBatches } from './pruning.js';
import { inTransaction, type Transaction } from './transaction.js';

/**
 * Things counted in Redis on a hot path and applied to PostgreSQL in batches a moment later: read
 * bandwidth, monthly active users, chat users. A hot path then costs one Redis command instead of a
 * transaction. Each kind is a Redis hash of pending entries (field → count). A flush renames the hash
 * to a batch of its own (atomically, so every entry lands in exactly one batch), applies it, and
 * deletes it; a batch left behind by a crash is applied again by whichever replica finds it, one whose
 * apply failed by every replica's next flush, and the processors make that harmless (per-account
 * claims, or idempotent inserts).
 */
export const pendingKey = (kind: string) => `svc:accrued:${kind}`;
export const batchKey = (kind: string, batch: string) => `svc:accrued:${kind}:batch:${batch}`;
/** Batches claimed and not applied yet: being applied, or left behind by a replica that stopped. */
const BATCHES = 'svc:accrued:batches';
/**
 * Batches whose apply failed: every replica's next flush tries them again. They are not waited for as
 * ones being applied, so a failure (PostgreSQL away a moment) never stalls the flushes behind it.
 */
const FAILED = 'svc:accrued:failed';
const memberOf = (kind: string, batch: string) => `${kind}:${batch}`;
/** Failed batches one flush tries again at most. */
const FAILED_TRIED_AT_ONCE = 100;

/** How often every replica flushes; also the delay before accrued usage shows in reports. */
export const ACCRUAL_FLUSH_MS = 1_000;
/** A batch older than this was abandoned by a replica that stopped mid-flush. */
const ABANDONED_AFTER_MS = 30_000;
/**
 * How long a batch's claims of its accounts (usage_flushes) are kept once it is out of Redis: only a
 * batch still in Redis can be applied again, and a client's resent claim comes within seconds.
 */
const APPLIED_CLAIMS_KEPT = sql.fragment`interval '1 day'`;

/**
 * Adds a hand-over's counts to the pending hash once, however often it is sent: Redis may run a
 * command whose answer never came (it timed out, or the connection dropped and the client sent it
 * again), so a hand-over sent again after an error must not count twice. Its id is remembered for a
 * day, far longer than a replica keeps retrying a hand-over while Redis answers.
 */
const HAND_OVER = `
if not redis.call('SET', KEYS[2], 1, 'NX', 'PX', ARGV[1]) then return 0 end
for i = 2, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1`;
const handOverKey = (id: string) => `svc:accrued:handed:${id}`;
const HAND_OVER_REMEMBERED_MS = 86_400_000;

/**
 * Claims a kind's pending hash as a batch, scored with Redis's clock (milliseconds) so that the
 * replicas' own clocks never need to agree on which batch came first. A batch id is claimed once: run
 * again (the client sends a command again after a reconnect when its answer was lost), the script
 * would otherwise rename the entries pending since over the batch, and lose the batch's.
 */
const CLAIM = `
if redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 1 end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('RENAME', KEYS[1], KEYS[2])
local time = redis.call('TIME')
redis.call('ZADD', KEYS[3], tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000), ARGV[1])
return 1`;

/** Claims what is pending of a kind as the batch `batch`: 1 once it is claimed, 0 if nothing was pending. */
export function batchClaimer(redis: Redis) {
  const claim = redisScript<number>(redis, CLAIM);
  return (kind: string, batch: string) =>
    claim(3, pendingKey(kind), batchKey(kind, batch), BATCHES, memberOf(kind, batch));
}

/** Applies one batch: `entries` are the hash's fields and their counts. */
export type BatchProcessor = (batch: string, entries: [field: string, count: number][]) => Promise<void>;

/** The separator of the parts of an entry's field (ids and names never contain a tab). */
export const FIELD_SEPARATOR = '\t';

/** Usage accrued per account, app, key mode, UTC day, metric and price, in base units. */
export const USAGE_KIND = 'usage';

/** A price as an entry's field carries it: usage is charged at the price of when it happened. */
export const priceParts = (price: UsagePrice) => [price.priceMicros, price.unitSize, price.allowance];

export function readPrice(parts: (string | undefined)[]): UsagePrice {
  const [priceMicros, unitSize, allowance] = parts.map(Number);
  return { priceMicros: priceMicros!, unitSize: unitSize!, allowance: allowance! };
}

/**
 * Runs `apply` once per account of a batch, in a transaction that first claims (batch, account): a
 * batch applied again after a crash changes nothing that was already committed. Every account is
 * tried even when one fails, so that one account's failure never holds back the others; the batch is
 * then tried again. Usage of an account or app that no longer exists (counted before a restore of an
 * older database) has nobody to charge: it is dropped with a notice, or it would fail every flush.
 */
export async function applyOncePerAccount<T>(
  pool: DatabasePool,
  batch: string,
  groups: Map<string, T>,
  apply: (tx: Transaction, accountId: string, group: T) => Promise<void>,
  onError?: (error: unknown) => void,
): Promise<void> {
  const failures: unknown[] = [];
  for (const accountId of [...groups.keys()].sort()) {
    try {
      await inTransaction(
        pool,
        async (tx) => {
          const claimed = await tx.maybeOneFirst(sql.unsafe`
            insert into usage_flushes (batch_id, account_id, flushed_at) values (${batch}, ${accountId}, now())
            on conflict do nothing returning true`);
          if (claimed) await apply(tx, accountId, groups.get(accountId)!);
        },
        onError,
      );
    } catch (error) {
      if (!(error instanceof ForeignKeyIntegrityConstraintViolationError)) failures.push(error);
      else
        onError?.(
          new Error(`usage of ${accountId} dropped: its account or app no longer exists`, { cause: error }),
        );
    }
  }
  if (failures.length > 0) throw failures[0];
}

export function createAccrual(deps: {
  pool: DatabasePool;
  redis: Redis;
  clock: Clock;
  metering: Metering;
  prices: Prices;
  onError?: (error: unknown) => void;
}) {
  const processors = new Map<string, BatchProcessor>();
  const claim = batchClaimer(deps.redis);
  const sendHandOver = redisScript<number>(deps.redis, HAND_OVER);
  /** Usage counted in process since the last hand-over (field → quantity). */
  let counted = new Map<string, number>();
  /** A hand-over sent without an answer: sent again, with its id, before anything counted since. */
  let unanswered: { id: string; entries: [field: string, quantity: number][] } | null = null;

  /** Moves the usage counted in process to Redis's pending hash; what Redis did not answer is kept. */
  async function handOver(): Promise<void> {
    for (let round = 0; round < 2; round += 1) {
      if (unanswered === null) {
        if (counted.size === 0) return;
        unanswered = { id: randomUUID(), entries: [...counted] };
        counted = new Map();
      }
      const sending = unanswered;
      await sendHandOver(
        2,
        pendingKey(USAGE_KIND),
        handOverKey(sending.id),
        HAND_OVER_REMEMBERED_MS,
        ...sending.entries.flat(),
      );
      // A flush running beside this one may have sent it too, and begun the next.
      if (unanswered === sending) unanswered = null;
    }
  }

  /** Applies a batch (`kind:batch`); one that fails is moved to the failed ones, to be tried again. */
  async function apply(member: string): Promise<void> {
    const split = member.indexOf(':');
    const [kind, batch] = [member.slice(0, split), member.slice(split + 1)];
    const processor = processors.get(kind);
    if (!processor) return;
    const key = batchKey(kind, batch);
    try {
      const hash = await deps.redis.hgetall(key);
      const entries = Object.entries(hash).map(([field, count]): [string, number] => [field, Number(count)]);
      if (entries.length > 0) await processor(batch, entries);
    } catch (error) {
      // Left where it is when Redis cannot take the move: applied by anyone once abandoned.
      await deps.redis
        .multi()
        .zrem(BATCHES, member)
        .sadd(FAILED, member)
        .exec()
        .catch(() => {});
      throw new Error(`the accrued batch ${member} did not apply; every flush tries it again`, {
        cause: error,
      });
    }
    await deps.redis.multi().del(key).zrem(BATCHES, member).srem(FAILED, member).exec();
  }

  /** Redis's clock in milliseconds: the one the batches are scored with. */
  async function redisNow(): Promise<number> {
    const [seconds, micros] = await deps.redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  /** Accrued usage: summed per (app, mode, day) and metered per account, charged in full. */
  const usageProcessor: BatchProcessor = async (batch, entries) => {
    const byAccount = new Map<string, Map<string, Usage[]>>();
    for (const [field, quantity] of entries) {
      const [accountId = '', appId, mode, day, product = '', metric = '', ...price] =
        field.split(FIELD_SEPARATOR);
      const group = [appId, mode, day].join(FIELD_SEPARATOR);
      const groups = byAccount.get(accountId) ?? new Map<string, Usage[]>();
      groups.set(group, [
        ...(groups.get(group) ?? []),
        { product, metric, quantity, price: readPrice(price) },
      ]);
      byAccount.set(accountId, groups);
    }
    await applyOncePerAccount(
      deps.pool,
      batch,
      byAccount,
      (tx, accountId, groups) =>
        deps.metering.meterAll(
          tx,
          [...groups].map(([group, usages]) => {
            const [appId = '', mode, day] = group.split(FIELD_SEPARATOR);
            return { payer: { accountId, appId, mode: mode as KeyMode }, usages, day };
          }),
        ),
      deps.onError,
    );
  };
  processors.set(USAGE_KIND, usageProcessor);

  return {
    /** A kind of accrued entries and how a batch of them is applied. */
    register: (kind: string, processor: BatchProcessor) => {
      processors.set(kind, processor);
    },

    /**
     * Counts usage now, at today's price, and meters it at the next flush. It is summed in process and
     * handed to Redis by the flush: a hot path (every keyed GET counts its bytes) sends nothing.
     */
    add: async (payer: Payer, usage: Usage): Promise<void> => {
      if (usage.quantity <= 0) return;
      const price = (await deps.prices.table()).get(metricKey(usage.product, usage.metric))!;
      const field = [
        payer.accountId,
        payer.appId,
        payer.mode,
        utcDay(deps.clock.now()),
        usage.product,
        usage.metric,
        ...priceParts(price),
      ].join(FIELD_SEPARATOR);
      counted.set(field, (counted.get(field) ?? 0) + usage.quantity);
    },

    /**
     * Deletes the claims of accounts by batches applied over a day ago; a batch still in Redis (one that
     * keeps failing) keeps its claims, which are what stop it charging an account twice.
     */
    prune: async () => {
      // Read together: a batch that fails meanwhile moves from one to the other.
      const [claimed, failed] = (await pipelined(
        deps.redis.multi().zrange(BATCHES, '0', '-1').smembers(FAILED),
      )) as [string[], string[]];
      const listed = [...claimed, ...failed].map((member) => member.slice(member.indexOf(':') + 1));
      return pruneInBatches(
        async (limit) =>
          (
            await deps.pool.query(sql.unsafe`
              delete from usage_flushes where (batch_id, account_id) in (
                select batch_id, account_id from usage_flushes
                where flushed_at < now() - ${APPLIED_CLAIMS_KEPT}
                  and batch_id <> all(${sql.array(listed, 'text')})
                limit ${limit})`)
          ).rowCount,
      );
    },

    /**
     * Applies what is pending of every kind, any batch a stopped replica left behind, and those that
     * failed before. When it returns without an error, everything accrued before it was called is applied, by this replica or another one
     * (usage another replica counted in process, once that replica's next flush has handed it over).
     */
    flush: async (): Promise<void> => {
      await handOver();
      // Every batch is tried, whichever fails: one that keeps failing never holds back the others.
      const failures: unknown[] = [];
      const tried = new Set<string>();
      /** Applies a batch once in this flush; answers whether it failed now. */
      const attempt = async (member: string) => {
        if (tried.has(member)) return false;
        tried.add(member);
        return apply(member).then(
          () => false,
          (error: unknown) => {
            failures.push(error);
            return true;
          },
        );
      };
      for (const kind of processors.keys()) {
        const batch = randomUUID();
        if ((await claim(kind, batch)) === 1) await attempt(memberOf(kind, batch));
      }
      const claimsEnded = await redisNow();
      for (const member of await deps.redis.zrangebyscore(
        BATCHES,
        '-inf',
        claimsEnded - ABANDONED_AFTER_MS,
      )) {
        await attempt(member);
      }
      // A kind this flush found empty may have been claimed by another replica's flush a moment
      // before, with entries accrued before this one was called: wait until every batch claimed by
      // the end of this flush's own claims is applied, or has failed.
      const deadline = Date.now() + ABANDONED_AFTER_MS;
      while ((await deps.redis.zcount(BATCHES, '-inf', claimsEnded)) > 0) {
        if (Date.now() > deadline) {
          for (const member of await deps.redis.zrangebyscore(BATCHES, '-inf', claimsEnded))
            await attempt(member);
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // Last, so that a batch that failed on another replica while this one waited is tried too. At
      // most FAILED_TRIED_AT_ONCE, picked at random, and only until one fails again: while PostgreSQL
      // is away each would wait out its connection timeout, and at random, a batch that always fails
      // holds back none in particular.
      const failed = await deps.redis.srandmember(FAILED, FAILED_TRIED_AT_ONCE);
      for (const member of failed) if (await attempt(member)) break;
      if (failures.length > 0) throw failures[0];
      if (failed.length === FAILED_TRIED_AT_ONCE && (await deps.redis.scard(FAILED)) > 0)
        throw new Error('more failed usage batches than a flush tries; the next flush goes on with them');
    },
  };
}

export type Accrual = ReturnType<typeof createAccrual>;
