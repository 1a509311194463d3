import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../src/adapters/redis.js';
import { createInvalidationBus, createSharedCache } from '../src/platform/cache.js';
import { testSettings } from './support.js';

const redis = createRedis(testSettings().SVC_REDIS_URL);
/** Every request's Redis command timeout (adapters/redis.ts). */
const COMMAND_TIMEOUT_MS = redis.options.commandTimeout ?? 0;
const buses: ReturnType<typeof createInvalidationBus>[] = [];
const bus = () => {
  const created = createInvalidationBus(redis);
  buses.push(created);
  return created;
};
afterAll(() => {
  for (const created of buses) created.close();
  redis.disconnect();
});

describe('the invalidation bus', () => {
  it('drops what a replica cached before its subscription was in place', async () => {
    // A replica answers its first requests while its subscriber still connects: a change published
    // meanwhile never reaches it, so what it cached then cannot be trusted.
    const starting = bus();
    const keys = createSharedCache<string>({ name: 'keys', ttlMs: 60_000, maxEntries: 10, bus: starting });
    expect(await keys.get('k', async () => 'before')).toBe('before');
    await starting.subscribed;
    expect(await keys.get('k', async () => 'after')).toBe('after');
  });

  it('subscribes when the process was busy for longer than a command may take', async () => {
    // A replica compiles its routes for seconds at start. Here the process is kept busy right after its
    // SUBSCRIBE went out, so that the answer waits: a command timer would fire before it is read.
    expect(COMMAND_TIMEOUT_MS).toBeGreaterThan(0);
    const source = createRedis(testSettings().SVC_REDIS_URL);
    const duplicate = source.duplicate.bind(source);
    source.duplicate = (override) => {
      const subscriber = duplicate(override);
      // After every listener of 'ready', the bus's SUBSCRIBE among them.
      subscriber.once('ready', () =>
        process.nextTick(() => {
          const until = performance.now() + 2 * COMMAND_TIMEOUT_MS;
          while (performance.now() < until) {}
        }),
      );
      return subscriber;
    };
    const busy = createInvalidationBus(source);
    try {
      const outcome = await Promise.race([
        busy.subscribed.then(() => 'subscribed'),
        // The busy time and one more command timeout after it.
        new Promise((resolve) => setTimeout(resolve, 3 * COMMAND_TIMEOUT_MS, 'never told')),
      ]);
      expect(outcome).toBe('subscribed');
    } finally {
      busy.close();
      source.disconnect();
    }
  });

  it('carries an invalidation to another replica once it has subscribed', async () => {
    const [one, other] = [bus(), bus()];
    const cached = createSharedCache<string>({ name: 'apps', ttlMs: 60_000, maxEntries: 10, bus: other });
    await Promise.all([one.subscribed, other.subscribed]);
    expect(await cached.get('a', async () => 'old')).toBe('old');
    const heard = new Promise<string | null>((resolve) => other.subscribe('apps', resolve));
    await one.publish('apps', 'a');
    expect(await heard).toBe('a');
    expect(await cached.get('a', async () => 'new')).toBe('new');
  });
});
