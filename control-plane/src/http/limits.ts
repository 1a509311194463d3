import type { Redis } from 'ioredis';
import { type Clock, secondsUntilUtcMidnight, utcDay } from '../lib/clock.js';

/** Spec: twenty invalid keys from one address within ten minutes lock the address out. */
export const INVALID_KEY_LIMIT = 20;
export const INVALID_KEY_WINDOW_SECONDS = 600;

export interface QuotaState {
  limit: number;
  remaining: number;
  resetSeconds: number;
  exceeded: boolean;
}

/**
 * Counters that must hold across replicas, kept in Redis. Windows are fixed: the lockout window
 * opens at an address's first invalid key, the daily quota window is the UTC day.
 */
export function createRequestLimits(deps: { redis: Redis; clock: Clock }) {
  const lockoutKey = (address: string) => `svc:authfail:${address}`;

  return {
    /** Seconds left of the address's lockout, or 0 when it may still try keys. */
    lockoutSecondsLeft: async (address: string): Promise<number> => {
      const key = lockoutKey(address);
      const [[, count], [, ttl]] = (await deps.redis.multi().get(key).ttl(key).exec()) as [
        [Error | null, string | null],
        [Error | null, number],
      ];
      if (Number(count ?? 0) < INVALID_KEY_LIMIT) return 0;
      return ttl > 0 ? ttl : INVALID_KEY_WINDOW_SECONDS;
    },

    recordInvalidKey: async (address: string): Promise<void> => {
      const key = lockoutKey(address);
      // EXPIRE NX: the window starts at the first failure and is not extended by later ones.
      await deps.redis.multi().incr(key).expire(key, INVALID_KEY_WINDOW_SECONDS, 'NX').exec();
    },

    /** Counts one request against the key's daily cap and tells where it stands. */
    consumeDailyQuota: async (keyId: string, limit: number): Promise<QuotaState> => {
      const now = deps.clock.now();
      const key = `svc:quota:${keyId}:${utcDay(now)}`;
      const [[, used]] = (await deps.redis
        .multi()
        .incr(key)
        .expire(key, 2 * 86_400, 'NX')
        .exec()) as [[Error | null, number]];
      return {
        limit,
        remaining: Math.max(0, limit - used),
        resetSeconds: secondsUntilUtcMidnight(now),
        exceeded: used > limit,
      };
    },
  };
}

export type RequestLimits = ReturnType<typeof createRequestLimits>;
