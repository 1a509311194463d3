import { createReadStream, createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { finished } from 'node:stream/promises';
import { type ChainableCommander, Redis } from 'ioredis';
import { digestOfFile, type FileDigest } from './manifest.js';

/**
 * Where the chat service keeps a user's live credential: a hash of the password's SHA-256 and its
 * expiry (credentialKey in control-plane/src/modules/chat/service.ts). The rest of Redis is caches,
 * counters and at most a second of usage not yet flushed to PostgreSQL: not worth restoring.
 */
const CREDENTIAL_KEY_PREFIX = 'svc:chat:credential:';
const BATCH = 500;

interface CredentialLine {
  /** The JID's local part. */
  user: string;
  hash: string;
  /** Epoch milliseconds. */
  expires: number;
}

function connect(redisUrl: string): Redis {
  return new Redis(redisUrl, { connectTimeout: 10_000, maxRetriesPerRequest: 1 });
}

/** A pipeline's replies; the first command that failed fails it all. */
async function execAll(commands: ChainableCommander): Promise<unknown[]> {
  const results = (await commands.exec()) ?? [];
  const failure = results.find(([error]) => error !== null);
  if (failure) throw failure[0];
  return results.map(([, reply]) => reply);
}

/** Saves every live chat credential, one JSON line each. */
export async function backupChatCredentials(
  redisUrl: string,
  dir: string,
  file: string,
): Promise<FileDigest & { count: number }> {
  const redis = connect(redisUrl);
  const out = createWriteStream(join(dir, file), { mode: 0o600 });
  let count = 0;
  try {
    const scan = redis.scanStream({ match: `${CREDENTIAL_KEY_PREFIX}*`, count: BATCH });
    for await (const keys of scan as AsyncIterable<string[]>) {
      if (keys.length === 0) continue;
      const reads = redis.pipeline();
      for (const key of keys) reads.hmget(key, 'hash', 'expires');
      const replies = await execAll(reads);
      keys.forEach((key, index) => {
        const [hash, expires] = replies[index] as (string | null)[];
        // A key that expired between the scan and the read is gone: nothing to keep.
        if (!hash || !expires) return;
        const line: CredentialLine = {
          user: key.slice(CREDENTIAL_KEY_PREFIX.length),
          hash,
          expires: Number(expires),
        };
        out.write(`${JSON.stringify(line)}\n`);
        count++;
      });
    }
  } finally {
    out.end();
    redis.disconnect();
  }
  await finished(out);
  return { ...(await digestOfFile(dir, file)), count };
}

/** Writes back the credentials that have not expired since; each keeps its own expiry. */
export async function restoreChatCredentials(
  redisUrl: string,
  dir: string,
  file: string,
): Promise<{ restored: number; expired: number }> {
  const redis = connect(redisUrl);
  let restored = 0;
  let expired = 0;
  try {
    let writes = redis.pipeline();
    for await (const text of createInterface({ input: createReadStream(join(dir, file)) })) {
      if (text === '') continue;
      const line = JSON.parse(text) as CredentialLine;
      if (line.expires <= Date.now()) {
        expired++;
        continue;
      }
      const key = `${CREDENTIAL_KEY_PREFIX}${line.user}`;
      writes.hset(key, 'hash', line.hash, 'expires', line.expires).pexpireat(key, line.expires);
      restored++;
      if (writes.length >= BATCH) {
        await execAll(writes);
        writes = redis.pipeline();
      }
    }
    await execAll(writes);
  } finally {
    redis.disconnect();
  }
  return { restored, expired };
}
