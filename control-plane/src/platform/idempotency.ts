import type { DatabasePool } from 'slonik';
import type { KeyMode } from './caller.js';
import type { Clock } from './clock.js';
import { errors } from './errors.js';
import { type HeldKey, idempotencyStore } from './idempotency-store.js';
import { randomBase62 } from './ids.js';
import type { Liveness } from './liveness.js';
import { pruneInBatches } from './pruning.js';
import type { Sealer } from './sealing.js';
import type { Db } from './transaction.js';

export type { HeldKey } from './idempotency-store.js';

/** How long a key answers what it first answered; past that, the same key runs again. */
export const IDEMPOTENCY_WINDOW_MS = 86_400_000;

/**
 * How long a run holds its key without an answer. Past it another attempt may take the key: the run's
 * process has died (its work, and any charge, rolled back with it). Far longer than a handler's
 * bounded work (a statement 15 s, an ejabberd call 5 s). A priced call's key whose process's heartbeat
 * is gone is taken over at once (liveness.ts).
 */
export const IDEMPOTENCY_LOCK_MS = 60_000;

/** What a key's first request answered, replayed to every later one. */
export interface KeptAnswer {
  status: number;
  /** The body exactly as it was sent. */
  body: string;
  /** Headers the handler set itself. */
  headers: Record<string, string>;
  costMicros: number;
}

export type Claimed = { held: HeldKey } | { replay: KeptAnswer };

/** What a kept body belongs to: sealed for one app, mode and key, it opens for no other. */
const ownerOf = (held: Pick<HeldKey, 'appId' | 'mode' | 'key'>) =>
  `idempotency:${held.appId}:${held.mode}:${held.key}`;

/**
 * Idempotency keys (`Idempotency-Key`) of one app in one key mode: a request claims its key before it
 * runs; the same key and request later get the kept answer, another request with the key a 422, and
 * a request while the first still runs a 409. Kept bodies are sealed: answers hold secrets shown once
 * (chat passwords, webhook signing secrets), which a replay shows again but the database never holds
 * in the clear.
 */
export function createIdempotency(deps: {
  pool: DatabasePool;
  clock: Clock;
  sealer: Sealer;
  liveness: Pick<Liveness, 'id' | 'isGone'>;
}) {
  /** The process a claim belongs to (claims are <instance>.<attempt>). */
  const instanceOf = (claim: string) => claim.slice(0, Math.max(0, claim.indexOf('.')));
  return {
    claim: async (
      scope: { appId: string; mode: KeyMode },
      key: string,
      fingerprint: string,
      /**
       * Whether a run whose process's heartbeat is gone may be taken over before its lock lapses. Only
       * a run whose work is all in the transaction that keeps its answer (a priced call that sends
       * nothing before its commit) is safe to: a process that only stalled (its heartbeat lapsed, it
       * still runs) then has its work refused and rolled back with its answer, where an unpriced run's
       * work, or an irreversible call's message, would already be done.
       */
      takeOverFromGone: boolean,
    ): Promise<Claimed> => {
      const claim = `${deps.liveness.id}.${randomBase62(20)}`;
      const held: HeldKey = { appId: scope.appId, mode: scope.mode, key, claim };
      const now = deps.clock.now();
      const lockedUntil = new Date(now.getTime() + IDEMPOTENCY_LOCK_MS);
      const store = idempotencyStore(deps.pool);
      const row = await store.claim(held, fingerprint, {
        now,
        windowStart: new Date(now.getTime() - IDEMPOTENCY_WINDOW_MS),
        lockedUntil,
      });
      if (row.claimed) return { held };
      if (row.fingerprint !== fingerprint) throw errors.idempotencyKeyReused();
      if (row.status === null || row.body === null) {
        // Its run's process died (a replica killed mid-request): its transaction rolled back with it.
        const holder = row.holder ?? '';
        const gone =
          takeOverFromGone && instanceOf(holder) !== '' && (await deps.liveness.isGone(instanceOf(holder)));
        if (gone && (await store.takeOver(held, holder, lockedUntil))) return { held };
        throw errors.idempotencyKeyInUse();
      }
      return {
        replay: {
          status: row.status,
          body: deps.sealer.open(Buffer.from(row.body, 'base64'), ownerOf(held)),
          headers: row.headers ?? {},
          costMicros: row.cost_micros ?? 0,
        },
      };
    },

    /**
     * Keeps the answer of a held key, through `db`: a charged call's transaction, so that the answer
     * and the charge commit together or not at all (the cost is filled in by the charge, in the
     * COMMIT). A key taken over meanwhile is a 409: its new holder's answer is the one kept.
     */
    keep: async (held: HeldKey, answer: Omit<KeptAnswer, 'costMicros'>, db: Db = deps.pool) => {
      const body = deps.sealer.seal(answer.body, ownerOf(held)).toString('base64');
      if (!(await idempotencyStore(db).answer(held, { ...answer, body }))) throw errors.idempotencyKeyInUse();
    },

    /** Gives up a held key without an answer: the same key may run again at once. */
    release: async (held: HeldKey) => {
      await idempotencyStore(deps.pool).release(held);
    },

    /** Deletes keys past their window, a batch at a time (one replica runs it: maintenance's lease). */
    prune: () => {
      const before = new Date(deps.clock.now().getTime() - IDEMPOTENCY_WINDOW_MS);
      return pruneInBatches((limit) => idempotencyStore(deps.pool).prune(before, limit));
    },
  };
}

export type Idempotency = ReturnType<typeof createIdempotency>;
