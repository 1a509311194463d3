import { createReadStream, createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import {
  CreateBucketCommand,
  GetObjectCommand,
  type GetObjectCommandOutput,
  HeadBucketCommand,
  NoSuchBucket,
  NoSuchKey,
  NotFound,
  PutObjectCommand,
  paginateListObjectsV2,
  S3Client,
} from '@aws-sdk/client-s3';
import { forEachConcurrently } from '../concurrency.js';
import { StackError } from '../errors.js';
import { digestOfFile, type FileDigest, verifyFile, writeDigested } from './manifest.js';

/** The control plane's bucket, as its SVC_S3_* settings name it. */
export interface BucketSettings {
  endpoint: string;
  region: string;
  accessKey: string;
  secretKey: string;
  bucket: string;
}

/** One object of the backup: a line of objects.jsonl, its bytes in `file`. */
interface ObjectEntry {
  key: string;
  file: string;
  bytes: number;
  sha256: string;
  contentType?: string;
  metadata?: Record<string, string>;
  cacheControl?: string;
  contentDisposition?: string;
  contentEncoding?: string;
  contentLanguage?: string;
}

const INDEX_FILE = 'objects.jsonl';
const OBJECTS_DIR = 'objects';
/** Objects in flight at once: enough to hide the round trips, few enough for any disk. */
const PARALLEL_OBJECTS = 8;

function s3Client(settings: BucketSettings): S3Client {
  // The SDK warns that its releases from 2027 on need Node 22; the pinned one does not, and the warning
  // would bury the command's few lines.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  return new S3Client({
    endpoint: settings.endpoint,
    region: settings.region,
    forcePathStyle: true,
    credentials: { accessKeyId: settings.accessKey, secretAccessKey: settings.secretKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

/** Every key of the bucket, a page at a time; none when the bucket does not exist yet. */
async function* bucketKeys(s3: S3Client, bucket: string): AsyncGenerator<string> {
  try {
    for await (const page of paginateListObjectsV2({ client: s3 }, { Bucket: bucket }))
      for (const object of page.Contents ?? []) if (object.Key !== undefined) yield object.Key;
  } catch (error) {
    if (!(error instanceof NoSuchBucket)) throw error;
  }
}

export interface BucketBackup extends FileDigest {
  bucket: string;
  count: number;
  totalBytes: number;
  /** Listed, then deleted before it could be read. */
  vanished: number;
}

/**
 * Copies every object of the bucket into `dir`: its bytes streamed to objects/<n>, its key, content
 * type and metadata to a line of objects.jsonl, with the SHA-256 of the bytes.
 */
export async function backupBucket(settings: BucketSettings, dir: string): Promise<BucketBackup> {
  const s3 = s3Client(settings);
  mkdirSync(join(dir, OBJECTS_DIR), { mode: 0o700 });
  const index = createWriteStream(join(dir, INDEX_FILE), { mode: 0o600 });
  let next = 0;
  let totalBytes = 0;
  let vanished = 0;
  try {
    await forEachConcurrently(bucketKeys(s3, settings.bucket), PARALLEL_OBJECTS, async (key) => {
      const file = `${OBJECTS_DIR}/${next++}`;
      let object: GetObjectCommandOutput;
      try {
        object = await s3.send(new GetObjectCommand({ Bucket: settings.bucket, Key: key }));
      } catch (error) {
        if (!(error instanceof NoSuchKey)) throw error;
        vanished++;
        return;
      }
      const { bytes, sha256 } = await writeDigested(object.Body as Readable, join(dir, file));
      const entry: ObjectEntry = {
        key,
        file,
        bytes,
        sha256,
        contentType: object.ContentType,
        metadata: object.Metadata,
        cacheControl: object.CacheControl,
        contentDisposition: object.ContentDisposition,
        contentEncoding: object.ContentEncoding,
        contentLanguage: object.ContentLanguage,
      };
      index.write(`${JSON.stringify(entry)}\n`);
      totalBytes += bytes;
    });
  } finally {
    index.end();
    s3.destroy();
  }
  await finished(index);
  const count = next - vanished;
  return { ...(await digestOfFile(dir, INDEX_FILE)), bucket: settings.bucket, count, totalBytes, vanished };
}

async function* indexEntries(dir: string): AsyncGenerator<ObjectEntry> {
  for await (const line of createInterface({ input: createReadStream(join(dir, INDEX_FILE)) }))
    if (line !== '') yield JSON.parse(line) as ObjectEntry;
}

/** Checks the index and every object's bytes against what the backup recorded. */
export async function verifyObjects(
  dir: string,
  expected: FileDigest & { count: number; totalBytes: number },
): Promise<void> {
  await verifyFile(dir, expected);
  let count = 0;
  let totalBytes = 0;
  await forEachConcurrently(indexEntries(dir), PARALLEL_OBJECTS, async (entry) => {
    await verifyFile(dir, entry);
    count++;
    totalBytes += entry.bytes;
  });
  if (count !== expected.count || totalBytes !== expected.totalBytes)
    throw new StackError(
      `${join(dir, INDEX_FILE)} lists ${count} objects of ${totalBytes} bytes, the manifest ${expected.count} of ${expected.totalBytes}`,
    );
}

/** Uploads every object of the backup under its key, with its content type and metadata. */
export async function restoreBucket(
  settings: BucketSettings,
  dir: string,
): Promise<{ count: number; totalBytes: number }> {
  const s3 = s3Client(settings);
  const Bucket = settings.bucket;
  let count = 0;
  let totalBytes = 0;
  try {
    // The control plane creates its bucket as it starts; a stack restored before that has none yet.
    try {
      await s3.send(new HeadBucketCommand({ Bucket }));
    } catch (error) {
      if (!(error instanceof NotFound)) throw error;
      await s3.send(new CreateBucketCommand({ Bucket }));
    }
    await forEachConcurrently(indexEntries(dir), PARALLEL_OBJECTS, async (entry) => {
      await s3.send(
        new PutObjectCommand({
          Bucket,
          Key: entry.key,
          Body: createReadStream(join(dir, entry.file)),
          ContentLength: entry.bytes,
          ContentType: entry.contentType,
          Metadata: entry.metadata,
          CacheControl: entry.cacheControl,
          ContentDisposition: entry.contentDisposition,
          ContentEncoding: entry.contentEncoding,
          ContentLanguage: entry.contentLanguage,
        }),
      );
      count++;
      totalBytes += entry.bytes;
    });
  } finally {
    s3.destroy();
  }
  return { count, totalBytes };
}
