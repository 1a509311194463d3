import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { StackError } from '../errors.js';
import { writeFileAtomic } from '../files.js';
import type { Profile } from '../profile.js';
import type { TableRows } from './database.js';

export const MANIFEST_FILE = 'manifest.json';
const FORMAT = 'svc-backup';
/** Raised when the layout of a backup directory changes; restore refuses versions it does not know. */
const FORMAT_VERSION = 1;

/** A file of the backup, with what it held when written. */
export interface FileDigest {
  file: string;
  bytes: number;
  sha256: string;
}

/** What a backup directory holds; written last, so a directory without it is an unfinished backup. */
export interface BackupManifest {
  format: typeof FORMAT;
  version: typeof FORMAT_VERSION;
  profile: Profile;
  startedAt: string;
  finishedAt: string;
  /**
   * A digest of the control plane's SVC_SEALING_KEY: the database holds secrets sealed with it
   * (webhook signing secrets), which only the same key opens.
   */
  sealingKeyDigest: string;
  database: FileDigest & {
    snapshotAt: string;
    migration: string;
    serverVersion: string;
    rows: TableRows;
  };
  /** objects.jsonl: one line per object (key, file, size, SHA-256, content type, metadata). */
  objects: FileDigest & { bucket: string; count: number; totalBytes: number };
  /** ejabberd's mnesia tables as a text dump (ejabberd's `dump` command), records per table. */
  ejabberd: FileDigest & { records: Record<string, number> };
  /** The chat credentials live when the backup was taken (Redis). */
  chatCredentials: FileDigest & { count: number };
}

export type ManifestContent = Omit<BackupManifest, 'format' | 'version'>;

export function writeManifest(dir: string, content: ManifestContent): void {
  const manifest: BackupManifest = { format: FORMAT, version: FORMAT_VERSION, ...content };
  writeFileAtomic(join(dir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
}

export function readManifest(dir: string): BackupManifest {
  const file = join(dir, MANIFEST_FILE);
  if (!existsSync(file))
    throw new StackError(`${file} does not exist: not a backup directory, or a backup that did not finish`);
  const manifest = JSON.parse(readFileSync(file, 'utf8')) as Partial<BackupManifest>;
  if (manifest.format !== FORMAT || manifest.version !== FORMAT_VERSION)
    throw new StackError(
      `${file} is not a backup this version can restore (format ${manifest.format} version ${manifest.version}, expected ${FORMAT} version ${FORMAT_VERSION})`,
    );
  return manifest as BackupManifest;
}

export function sealingKeyDigest(key: string): string {
  return createHash('sha256').update(`svc backup sealing key\0${key}`).digest('hex').slice(0, 16);
}

/** A pass-through that counts and hashes what flows through it. */
export function digestingStream() {
  const hash = createHash('sha256');
  let bytes = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  return { stream, result: () => ({ bytes, sha256: hash.digest('hex') }) };
}

/** Streams `source` into `path` (0600), returning its size and SHA-256. */
export async function writeDigested(
  source: NodeJS.ReadableStream,
  path: string,
): Promise<{ bytes: number; sha256: string }> {
  const digest = digestingStream();
  await pipeline(source, digest.stream, createWriteStream(path, { mode: 0o600 }));
  return digest.result();
}

export async function digestOfFile(dir: string, file: string): Promise<FileDigest> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(join(dir, file)) as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { file, bytes, sha256: hash.digest('hex') };
}

/** Fails unless the file still has the size and SHA-256 it was written with. */
export async function verifyFile(dir: string, expected: FileDigest): Promise<void> {
  const path = join(dir, expected.file);
  if (!existsSync(path)) throw new StackError(`${path} is missing from the backup`);
  const actual = await digestOfFile(dir, expected.file);
  if (actual.bytes !== expected.bytes || actual.sha256 !== expected.sha256)
    throw new StackError(
      `${path} is damaged: ${actual.bytes} bytes with SHA-256 ${actual.sha256}, the manifest says ${expected.bytes} bytes with ${expected.sha256}`,
    );
}
