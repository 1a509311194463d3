import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { redisScript } from '../adapters/redis.js';

/** The Redis key of the lease `name`. */
export const leaseKey = (name: string) => `svc:lease:${name}`;

/** Deletes the lease only if it is still the holder's: an expired lease may have gone to another. */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/** Extends the lease only if it is still the holder's. */
const RENEW = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;

/**
 * Runs a task that one replica at a time should run (reconciliation, the spend guard, the sweeps) if
 * no other replica runs it now, and tells whether it ran. The lease is renewed while the task runs,
 * however long it takes, and given back when it ends; if its holder stops, it expires after `ttlMs`.
 */
export async function withLease<T>(
  redis: Redis,
  name: string,
  ttlMs: number,
  task: () => Promise<T>,
): Promise<{ ran: true; result: T } | { ran: false }> {
  const key = leaseKey(name);
  const holder = randomUUID();
  if ((await redis.set(key, holder, 'PX', ttlMs, 'NX')) !== 'OK') return { ran: false };
  const renew = redisScript<number>(redis, RENEW);
  // A renewal that fails (Redis away) is tried again at the next beat; the task goes on regardless.
  const heartbeat = setInterval(() => void renew(1, key, holder, ttlMs).catch(() => {}), ttlMs / 3);
  heartbeat.unref();
  try {
    return { ran: true, result: await task() };
  } finally {
    clearInterval(heartbeat);
    await redisScript<number>(redis, RELEASE)(1, key, holder);
  }
}
