import type { Redis } from 'ioredis';

/**
 * Takes a lease for a task that one replica at a time should run (reconciliation, the spend guard).
 * The lease simply expires: a replica that stops while holding it delays the task by `ttlMs` at most.
 */
export async function takeLease(redis: Redis, name: string, ttlMs: number): Promise<boolean> {
  return (await redis.set(`svc:lease:${name}`, '1', 'PX', ttlMs, 'NX')) === 'OK';
}
