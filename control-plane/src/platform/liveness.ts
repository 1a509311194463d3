import type { Redis } from 'ioredis';
import { randomBase62 } from './ids.js';

/** How often a process says it is alive, and how long that stays true without another beat. */
export const HEARTBEAT_EVERY_MS = 1_000;
export const HEARTBEAT_TTL_MS = 4_000;

const keyOf = (instance: string) => `svc:instance:${instance}`;

/**
 * This process among the control plane's replicas: an id, and a heartbeat in Redis that lapses within
 * seconds of the process dying. Work a process holds (an idempotency key's run) names its id, so that
 * another replica can tell a run that is still going from one whose process is gone.
 */
export async function startLiveness(redis: Redis, onError: (error: unknown) => void) {
  const id = randomBase62(12);
  const beat = () => redis.set(keyOf(id), '1', 'PX', HEARTBEAT_TTL_MS).catch(onError);
  // Alive before the first claim names it (with Redis down, from its first beat once it is back:
  // a key taken over from a live run is still run once, as keep() refuses the run that lost it).
  await beat();
  const timer = setInterval(beat, HEARTBEAT_EVERY_MS);
  timer.unref();
  return {
    id,
    /**
     * True only when Redis answers that the instance's heartbeat is gone. Unsure (Redis down) is
     * false: waiting for a lock to lapse is slow but safe.
     */
    isGone: async (instance: string): Promise<boolean> =>
      instance !== id && (await redis.exists(keyOf(instance)).catch(() => 1)) === 0,
    /** Stops beating and says so at once: a graceful stop hands its keys over without a wait. */
    stop: async () => {
      clearInterval(timer);
      await redis.del(keyOf(id)).catch(onError);
    },
  };
}

export type Liveness = Awaited<ReturnType<typeof startLiveness>>;
