import { constants, createReadStream, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pipeline } from 'node:stream/promises';
import { StackError } from '../errors.js';
import { EXCLUSIVE_CREATE, unguessable } from '../files.js';
import type { OsUser } from '../os-user.js';
import { type FileDigest, writeDigested } from './manifest.js';

/** How backup and restore reach a profile's ejabberd. */
export interface EjabberdTarget {
  /** Its HTTP API (…/api). */
  apiUrl: string;
  /** The operator's API account ("user@domain:secret"): it may run any command, the control plane's not. */
  operatorCredential: string;
  /** Its mnesia spool: the only directory both ejabberd and the runner can write. */
  spoolDir: string;
  /** The account it runs as, when the runner is root. */
  osUser: OsUser | undefined;
}

/** A dump or load of a large archive takes a while; ejabberd answers when it is done. */
const COMMAND_TIMEOUT_MS = 30 * 60_000;

async function operatorCommand(target: EjabberdTarget, command: string, body: object): Promise<void> {
  const response = await fetch(`${target.apiUrl}/${command}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      authorization: `Basic ${Buffer.from(target.operatorCredential).toString('base64')}`,
    },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(COMMAND_TIMEOUT_MS),
  });
  const answer = await response.text();
  if (response.status !== 200)
    throw new StackError(`ejabberd's ${command} command failed (HTTP ${response.status}): ${answer}`);
}

/**
 * Records per table in a text dump: each record is a term starting a line ("{muc_room,…"); the first
 * term ({tables,…}) describes the tables.
 */
async function recordsPerTable(path: string): Promise<Record<string, number>> {
  const records: Record<string, number> = {};
  for await (const line of createInterface({ input: createReadStream(path) })) {
    const table = /^\{([a-z0-9_]+),/.exec(line)?.[1];
    if (table !== undefined && table !== 'tables') records[table] = (records[table] ?? 0) + 1;
  }
  return records;
}

/**
 * A file name in the spool that no other run of this command uses, and that ejabberd's account, which
 * owns the spool, cannot guess to plant something there first.
 */
const spoolFile = (target: EjabberdTarget, purpose: string) =>
  join(target.spoolDir, `svc-${purpose}-${unguessable()}.dump`);

/**
 * Opens the dump ejabberd wrote, refusing anything its account could have put there instead: a symlink
 * (O_NOFOLLOW), a FIFO that would block the open (O_NONBLOCK; no effect on a regular file), or a hard
 * link to a file of another user.
 */
export async function openDump(path: string, osUser: OsUser | undefined) {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stat = await handle.stat();
    const expectedOwner = osUser?.uid ?? process.getuid?.();
    if (!stat.isFile() || stat.uid !== expectedOwner)
      throw new StackError(`${path} is not a regular file of ejabberd's: refusing to read it`);
    return handle;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/**
 * Copies `source` to `path` in the spool for ejabberd to read: created exclusively (never through
 * something its account planted there, since it owns the spool) and handed to it by the descriptor.
 */
export async function copyIntoSpool(source: string, path: string, osUser: OsUser | undefined) {
  const handle = await open(path, EXCLUSIVE_CREATE, 0o600);
  try {
    if (osUser) await handle.chown(osUser.uid, osUser.gid);
    await pipeline(createReadStream(source), handle.createWriteStream());
  } finally {
    await handle.close();
  }
}

/**
 * ejabberd's own data, which PostgreSQL does not hold: persistent rooms, offline messages, message
 * archives, private storage (bookmarks), block lists and the per-app archiving flags. ejabberd's `dump`
 * writes every disc table as text, which `load` reads into any node, whatever its name.
 */
export async function backupEjabberd(
  target: EjabberdTarget,
  dir: string,
  file: string,
): Promise<FileDigest & { records: Record<string, number> }> {
  const dumped = spoolFile(target, 'backup');
  try {
    await operatorCommand(target, 'dump', { file: dumped });
    const dump = await openDump(dumped, target.osUser);
    const digest = await writeDigested(dump.createReadStream(), join(dir, file)).finally(() => dump.close());
    return { file, ...digest, records: await recordsPerTable(join(dir, file)) };
  } finally {
    rmSync(dumped, { force: true });
  }
}

/**
 * Writes the dump's records into the running ejabberd (a record with the same key is replaced; others
 * are kept).
 */
export async function restoreEjabberd(target: EjabberdTarget, dir: string, file: string): Promise<void> {
  const loaded = spoolFile(target, 'restore');
  try {
    await copyIntoSpool(join(dir, file), loaded, target.osUser);
    await operatorCommand(target, 'load', { file: loaded });
  } finally {
    rmSync(loaded, { force: true });
  }
}
