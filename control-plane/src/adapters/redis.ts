import { createHash } from 'node:crypto';
import { type ChainableCommander, Redis } from 'ioredis';

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
    // No auto-pipelining: ioredis keeps one auto-pipeline in flight per connection, so commands of
    // concurrent requests wait for the whole previous batch to be answered. With the admission
    // scripts that cost Redis tens of µs each, that wait left the process idle: a shield ticket went
    // 24% faster at 16 in flight without it (the other mints 1–12%; a bare SET the same ± noise).
    enableAutoPipelining: false,
  });
}

/** The oldest Redis the scripts run on: the shield's uses EXPIRE … NX, new in 7.0. */
const OLDEST_REDIS_MAJOR = 7;

/**
 * Refuses a Redis older than the scripts need, from its `INFO server` text: otherwise the first
 * script that uses a newer command would fail a request, long after the start.
 */
export function requireRedisVersion(info: string): string {
  const version = /^redis_version:(\S+)/m.exec(info)?.[1];
  if (!version) throw new Error('Redis did not say its version (INFO server)');
  if (Number.parseInt(version, 10) < OLDEST_REDIS_MAJOR)
    throw new Error(
      `Redis ${version} is too old: the control plane needs Redis ${OLDEST_REDIS_MAJOR} or later`,
    );
  return version;
}

/**
 * A Lua script called by its SHA, sent whole only when Redis does not know it yet (after a restart).
 * Not ioredis's defineCommand: a command defined after an auto-pipeline was made is missing from it.
 */
export function redisScript<T>(redis: Redis, lua: string) {
  const sha = createHash('sha1').update(lua).digest('hex');
  return async (numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<T> => {
    try {
      return (await redis.evalsha(sha, numberOfKeys, ...keysAndArgs)) as T;
    } catch (error) {
      if (!(error instanceof Error && error.message.startsWith('NOSCRIPT'))) throw error;
      return (await redis.eval(lua, numberOfKeys, ...keysAndArgs)) as T;
    }
  };
}

/** The replies of a pipeline's commands, sent in one round trip; the first command that failed throws. */
export async function pipelined(commands: ChainableCommander): Promise<unknown[]> {
  const replies = (await commands.exec()) ?? [];
  return replies.map(([error, reply]) => {
    if (error) throw error;
    return reply;
  });
}
