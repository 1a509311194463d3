import type { Redis } from 'ioredis';
import { type DatabasePool, sql } from 'slonik';
import { z } from 'zod';
import { redisScript } from '../adapters/redis.js';

/**
 * Whether a live account can pay (its balance is above zero), mirrored in Redis so that mints, chat
 * logins and priced calls learn it in the round trip they make anyway. PostgreSQL stays the truth:
 * a missing entry is read from it, and every write carries the balance's version, so a late
 * update never overwrites a newer one whatever order they arrive in.
 */
export const standingKey = (accountId: string) => `svc:standing:${accountId}`;

/** Entries are refreshed when the balance crosses zero; the TTL bounds the damage of a lost refresh. */
export const STANDING_TTL_SECONDS = 300;

const StandingRow = z.object({ balance_micros: z.number().int(), balance_version: z.number().int() });

/** `<1 funded | 0 empty>:<version>`, replaced only by a newer version. */
const SET_IF_NEWER = `
local current = redis.call('GET', KEYS[1])
if current then
  local version = tonumber(string.match(current, ':(%d+)$'))
  if version and version > tonumber(ARGV[2]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'EX', ARGV[3])
return 1`;

export function createStanding(deps: { pool: DatabasePool; redis: Redis }) {
  const setIfNewer = redisScript<number>(deps.redis, SET_IF_NEWER);
  const record = (accountId: string, balance: number, version: number) =>
    setIfNewer(1, standingKey(accountId), balance > 0 ? '1' : '0', version, STANDING_TTL_SECONDS);

  /** Reads the truth from PostgreSQL and mirrors it; false for an unknown account. */
  async function load(accountId: string): Promise<boolean> {
    const row = await deps.pool.maybeOne(sql.type(StandingRow)`
      select balance_micros, balance_version from accounts where id = ${accountId}`);
    if (!row) return false;
    await record(accountId, row.balance_micros, row.balance_version);
    return row.balance_micros > 0;
  }

  return {
    /** After a committed change of the balance. */
    record: async (accountId: string, balance: number, version: number): Promise<void> => {
      await record(accountId, balance, version);
    },

    load,

    /** Whether the live account can pay, from the mirror (or PostgreSQL when it has no entry). */
    funded: async (accountId: string): Promise<boolean> => {
      const entry = await deps.redis.get(standingKey(accountId));
      return entry === null ? load(accountId) : entry.startsWith('1');
    },
  };
}

export type Standing = ReturnType<typeof createStanding>;
