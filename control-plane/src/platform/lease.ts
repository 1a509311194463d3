import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { redisScript } from '../adapters/redis.js';

/** Deletes the lease only if it is still the holder's: an expired lease may have gone to another. */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * Runs a task that one replica at a time should run (reconciliation, the spend guard) if no other
 * replica runs it now, and tells whether it ran. The lease is given back when the task ends; it
 * expires after `ttlMs` in case its holder stops mid-task.
 */
export async function withLease<T>(
  redis: Redis,
  name: string,
  ttlMs: number,
  task: () => Promise<T>,
): Promise<{ ran: true; result: T } | { ran: false }> {
  const key = `svc:lease:${name}`;
  const holder = randomUUID();
  if ((await redis.set(key, holder, 'PX', ttlMs, 'NX')) !== 'OK') return { ran: false };
  try {
    return { ran: true, result: await task() };
  } finally {
    await redisScript<number>(redis, RELEASE)(1, key, holder);
  }
}
