import { sql } from 'slonik';
import { z } from 'zod';
import { statement } from '../db/transaction.js';
import type { KeyMode } from './caller.js';
import type { Db } from './transaction.js';

/** What svc_idempotency_claim answers: the key claimed, or the row as it stands (answered or running). */
export const ClaimRow = z.object({
  claimed: z.boolean(),
  fingerprint: z.string().nullable(),
  status: z.number().int().nullable(),
  body: z.string().nullable(),
  headers: z.record(z.string(), z.string()).nullable(),
  cost_micros: z.number().int().nullable(),
  /** The claim of the attempt holding a key that is not this one's (null when claimed). */
  holder: z.string().nullable(),
});

/** One attempt's hold on a key of an app in a key mode. */
export interface HeldKey {
  appId: string;
  mode: KeyMode;
  key: string;
  /** The attempt's own id: only the holder may answer or release the key. */
  claim: string;
}

/** SQL of idempotency keys (migrations/0009_idempotency.sql). */
export function idempotencyStore(db: Db) {
  const held = (key: HeldKey) =>
    sql.fragment`app_id = ${key.appId} and mode = ${key.mode} and key = ${key.key} and claim = ${key.claim}`;
  return {
    claim: (key: HeldKey, fingerprint: string, at: { now: Date; windowStart: Date; lockedUntil: Date }) =>
      db.one(sql.type(ClaimRow)`
        select claimed, fingerprint, status, body, headers, cost_micros, holder
        from svc_idempotency_claim(${key.appId}, ${key.mode}, ${key.key}, ${fingerprint}, ${key.claim},
                                   ${sql.timestamp(at.now)}, ${sql.timestamp(at.windowStart)},
                                   ${sql.timestamp(at.lockedUntil)})`),

    /** Takes a running key from the attempt `from` (whose process is gone); false when it is no longer that one's. */
    takeOver: async (key: HeldKey, from: string, lockedUntil: Date) =>
      (
        await db.query(statement`
          update idempotency_keys set claim = ${key.claim}, locked_until = ${sql.timestamp(lockedUntil)}
          where ${held({ ...key, claim: from })} and status is null`)
      ).rowCount === 1,

    /** Records the answer; false when the key is no longer this attempt's (its lock lapsed and another took it). */
    answer: async (key: HeldKey, answer: { status: number; body: string; headers: Record<string, string> }) =>
      (
        await db.query(statement`
          update idempotency_keys
          set status = ${answer.status}, body = ${answer.body}, headers = ${sql.jsonb(answer.headers)},
              locked_until = null
          where ${held(key)}`)
      ).rowCount === 1,

    /** Gives an unanswered key back, so that the same key can run again at once. */
    release: (key: HeldKey) =>
      db.query(statement`delete from idempotency_keys where ${held(key)} and status is null`),

    /** Deletes up to `limit` keys claimed before `before`; answers how many went. */
    prune: async (before: Date, limit: number) =>
      (
        await db.query(statement`
          delete from idempotency_keys where (app_id, mode, key) in (
            select app_id, mode, key from idempotency_keys where created_at < ${sql.timestamp(before)}
            limit ${limit})`)
      ).rowCount,
  };
}
