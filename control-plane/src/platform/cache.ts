import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

const CHANNEL = 'svc:invalidate';

/**
 * Tells every replica that a cached entry changed, through Redis pub/sub. A replica hears nothing
 * before its subscription is in place, and may miss messages while it has lost it: each time it
 * (re)subscribes it drops everything it cached; each cache's TTL is the last safety net.
 */
export interface InvalidationBus {
  publish(cache: string, key: string | null): Promise<void>;
  subscribe(cache: string, onInvalidate: (key: string | null) => void): void;
  /** Settles once the first subscription is in place: from then on, every message is heard. */
  readonly subscribed: Promise<void>;
  close(): void;
}

export function createInvalidationBus(
  redis: Redis,
  onError: (error: unknown) => void = () => {},
): InvalidationBus {
  const listeners = new Map<string, ((key: string | null) => void)[]>();
  // A replica forgets its own entries when it publishes; its own messages coming back are skipped.
  const origin = randomUUID();
  const everything = () => {
    for (const callbacks of listeners.values()) for (const callback of callbacks) callback(null);
  };
  // A subscribed connection can do nothing else, hence a connection of its own. Without the requests'
  // command timeout: a process busy for seconds at start (compiling its routes' schemas) read the
  // SUBSCRIBE's answer only after its timer had fired, and its subscription was never reported.
  const subscriber = redis.duplicate({
    lazyConnect: false,
    maxRetriesPerRequest: null,
    commandTimeout: undefined,
  });
  subscriber.on('error', onError);
  let markSubscribed = () => {};
  const subscribed = new Promise<void>((resolve) => {
    markSubscribed = resolve;
  });
  subscriber.on('ready', () => {
    subscriber.subscribe(CHANNEL).then(() => {
      // What was cached before (at start too: the first requests may come before this) may have
      // missed a change published meanwhile.
      everything();
      markSubscribed();
    }, onError);
  });
  subscriber.on('message', (_channel: string, message: string) => {
    try {
      const [from, cache, key] = JSON.parse(message) as [string, string, string | null];
      if (from === origin) return;
      for (const callback of listeners.get(cache) ?? []) callback(key);
    } catch (error) {
      onError(error);
    }
  });
  return {
    publish: async (cache, key) => {
      await redis.publish(CHANNEL, JSON.stringify([origin, cache, key]));
    },
    subscribe: (cache, onInvalidate) => {
      listeners.set(cache, [...(listeners.get(cache) ?? []), onInvalidate]);
    },
    subscribed,
    close: () => subscriber.disconnect(),
  };
}

export interface SharedCache<V> {
  /** The cached value, or the loaded one (concurrent misses of one key share one load). */
  get(key: string, load: () => Promise<V>): Promise<V>;
  /** Whether `get` would answer without a load of its own: the entry is here, or its load under way. */
  has(key: string): boolean;
  /** Forgets an entry here and on every other replica. */
  invalidate(key: string): Promise<void>;
  /** Forgets an entry here only: this replica suspects it missed a change the others heard of. */
  drop(key: string): void;
  /** Forgets every entry here and on every other replica. */
  clear(): Promise<void>;
}

/**
 * An in-process cache of something every replica reads often and that changes rarely (keys, app
 * settings, the price table). Entries live `ttlMs` at most (process time, not the app's clock); a
 * change anywhere invalidates them everywhere through the bus.
 */
export function createSharedCache<V>(options: {
  name: string;
  ttlMs: number;
  maxEntries: number;
  bus: InvalidationBus;
  /** Which loaded values are kept (all by default); the others are answered and loaded again next time. */
  keeps?: (value: V) => boolean;
}): SharedCache<V> {
  const entries = new Map<string, { value: V; expiresAt: number }>();
  const loading = new Map<string, Promise<V>>();
  // An invalidation also drops the loads under way: a load that began before it stores nothing.
  const forget = (key: string | null) => {
    if (key === null) {
      entries.clear();
      loading.clear();
    } else {
      entries.delete(key);
      loading.delete(key);
    }
  };
  options.bus.subscribe(options.name, forget);

  return {
    has: (key) => (entries.get(key)?.expiresAt ?? 0) > performance.now() || loading.has(key),
    get: async (key, load) => {
      const now = performance.now();
      const hit = entries.get(key);
      if (hit && hit.expiresAt > now) return hit.value;
      const pending = loading.get(key);
      if (pending) return pending;
      const promise = load().then(
        (value) => {
          if (loading.get(key) === promise) {
            loading.delete(key);
            if (options.keeps && !options.keeps(value)) return value;
            // Maps keep insertion order: the first entry is the oldest.
            if (entries.size >= options.maxEntries) entries.delete(entries.keys().next().value as string);
            entries.set(key, { value, expiresAt: performance.now() + options.ttlMs });
          }
          return value;
        },
        (error: unknown) => {
          if (loading.get(key) === promise) loading.delete(key);
          throw error;
        },
      );
      loading.set(key, promise);
      return promise;
    },
    invalidate: async (key) => {
      forget(key);
      await options.bus.publish(options.name, key);
    },
    drop: (key) => forget(key),
    clear: async () => {
      forget(null);
      await options.bus.publish(options.name, null);
    },
  };
}
