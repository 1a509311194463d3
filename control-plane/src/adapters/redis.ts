import { Redis } from 'ioredis';

/**
 * One Redis client per process. Commands time out instead of queueing forever while Redis is
 * away, so a request fails fast with a 500 rather than hanging.
 */
export function createRedis(url: string): Redis {
  return new Redis(url, {
    commandTimeout: 2_000,
    connectTimeout: 2_000,
    maxRetriesPerRequest: 1,
    lazyConnect: false,
    // Commands issued in the same tick (concurrent requests) share one write to the socket.
    enableAutoPipelining: true,
  });
}
