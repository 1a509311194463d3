import type { Readable } from 'node:stream';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  PutBucketLifecycleConfigurationCommand,
  PutBucketNotificationConfigurationCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { UpstreamError } from '../platform/errors.js';
import { createPresigner } from './sigv4.js';

export interface S3Settings {
  endpoint: string;
  publicEndpoint: string;
  region: string;
  accessKey: string;
  secretKey: string;
  bucket: string;
}

/** The MinIO webhook target the runner and compose configure (MINIO_NOTIFY_WEBHOOK_*_PRIMARY). */
export const NOTIFICATION_QUEUE_ARN = 'arn:minio:sqs::PRIMARY:webhook';

/** The SDK's client for MinIO at `endpoint`, as the control plane configures it. */
export function s3Client(
  endpoint: string,
  settings: Omit<S3Settings, 'endpoint' | 'publicEndpoint' | 'bucket'>,
): S3Client {
  const s3 = new S3Client({
    endpoint,
    region: settings.region,
    forcePathStyle: true,
    credentials: { accessKeyId: settings.accessKey, secretAccessKey: settings.secretKey },
    // The default (WHEN_SUPPORTED) bakes the CRC32 of an empty body into presigned PUT URLs.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  // MinIO's own 4xx answers (no such key…) pass through; a MinIO that cannot be reached or answers
  // 5xx even after the SDK's retries is a 503 to retry, not a 500. So is a refusal that says nothing
  // (the SDK's 'Unknown': a HEAD's answer has no body, and only its 404 has a name): a HEAD that MinIO
  // refused while shutting down was a 500.
  s3.middlewareStack.add(
    (next) => async (args) => {
      try {
        return await next(args);
      } catch (error) {
        if (
          error instanceof S3ServiceException &&
          (error.$metadata.httpStatusCode ?? 500) < 500 &&
          error.name !== 'Unknown'
        )
          throw error;
        throw new UpstreamError('MinIO', error instanceof Error ? error.message : String(error));
      }
    },
    { step: 'initialize', name: 'minioUnavailable' },
  );
  return s3;
}

/** The headers an upload must send exactly (lowercase, as signed). */
export const uploadHeaders = (contentType: string, sizeBytes: number) => ({
  'content-type': contentType,
  'content-length': String(sizeBytes),
  'if-none-match': '*',
});

const notFound = (error: unknown) =>
  error instanceof S3ServiceException &&
  (error.$metadata.httpStatusCode === 404 || error.name === 'NotFound');

/**
 * The control plane's only client of MinIO. The SDK's client talks to MinIO on the internal endpoint;
 * URLs are signed (no network) for the public endpoint browsers reach, because a signature covers the
 * host it was made for.
 */
export function createObjectStore(settings: S3Settings) {
  const internal = s3Client(settings.endpoint, settings);
  const Bucket = settings.bucket;
  const presign = createPresigner();

  async function sizeOf(key: string): Promise<number | null> {
    try {
      const head = await internal.send(new HeadObjectCommand({ Bucket, Key: key }));
      return head.ContentLength ?? 0;
    } catch (error) {
      if (notFound(error)) return null;
      throw error;
    }
  }
  const signing = {
    endpoint: settings.publicEndpoint,
    bucket: Bucket,
    region: settings.region,
    accessKey: settings.accessKey,
    secretKey: settings.secretKey,
  };

  return {
    /** Creates the bucket if needed, with its expiry rules and its event notifications. */
    ensureBucket: async (rules: { testPrefix: string; testObjectDays: number }) => {
      try {
        await internal.send(new HeadBucketCommand({ Bucket }));
      } catch (error) {
        if (!notFound(error)) throw error;
        await internal.send(new CreateBucketCommand({ Bucket }));
      }
      // The safety net behind the control plane's own sweeper: test objects go after their time.
      await internal.send(
        new PutBucketLifecycleConfigurationCommand({
          Bucket,
          LifecycleConfiguration: {
            Rules: [
              {
                ID: 'expire-test-objects',
                Status: 'Enabled',
                Filter: { Prefix: rules.testPrefix },
                Expiration: { Days: rules.testObjectDays },
              },
            ],
          },
        }),
      );
      await internal.send(
        new PutBucketNotificationConfigurationCommand({
          Bucket,
          NotificationConfiguration: {
            QueueConfigurations: [
              { QueueArn: NOTIFICATION_QUEUE_ARN, Events: ['s3:ObjectCreated:*', 's3:ObjectRemoved:*'] },
            ],
          },
        }),
      );
    },

    /**
     * A PUT URL for exactly these bytes, once: the Content-Type and the Content-Length are signed in
     * (MinIO refuses any other type or size), and so is `If-None-Match: *`, so the URL cannot replace
     * bytes that are there (MinIO answers 412).
     */
    presignUpload: async (key: string, contentType: string, sizeBytes: number, expiresIn: number) =>
      presign({
        ...signing,
        method: 'PUT',
        key,
        expiresInSeconds: expiresIn,
        signedHeaders: uploadHeaders(contentType, sizeBytes),
        query: { 'x-id': 'PutObject' },
      }),

    /** A GET URL; with a filename, browsers save the file instead of showing it. */
    presignDownload: async (key: string, expiresIn: number, attachmentName?: string) =>
      presign({
        ...signing,
        method: 'GET',
        key,
        expiresInSeconds: expiresIn,
        query: {
          ...(attachmentName
            ? {
                'response-content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(attachmentName)}`,
              }
            : {}),
          'x-id': 'GetObject',
        },
      }),

    /** A GET URL on the internal endpoint, for the control plane's own tools (ffprobe, ffmpeg). */
    presignInternalGet: async (key: string, expiresIn: number) =>
      presign({
        ...signing,
        endpoint: settings.endpoint,
        method: 'GET',
        key,
        expiresInSeconds: expiresIn,
        query: { 'x-id': 'GetObject' },
      }),

    /** Writes bytes the control plane made itself (thumbnails, the sandbox's clips). */
    put: async (key: string, body: Buffer, contentType: string): Promise<void> => {
      await internal.send(new PutObjectCommand({ Bucket, Key: key, Body: body, ContentType: contentType }));
    },

    /**
     * The bytes of an object, or of one range of them (`bytes=…` as HTTP sends it), as a stream; null
     * when nothing is there. A range past the end answers `unsatisfiable` with the object's size.
     */
    read: async (
      key: string,
      range?: string,
    ): Promise<
      { body: Readable; length: number; contentRange: string | undefined } | { unsatisfiable: number } | null
    > => {
      try {
        const object = await internal.send(
          new GetObjectCommand({ Bucket, Key: key, ...(range ? { Range: range } : {}) }),
        );
        return {
          body: object.Body as Readable,
          length: object.ContentLength ?? 0,
          contentRange: object.ContentRange,
        };
      } catch (error) {
        if (notFound(error) || (error instanceof S3ServiceException && error.name === 'NoSuchKey'))
          return null;
        if (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 416) {
          const size = await internal.send(new HeadObjectCommand({ Bucket, Key: key }));
          return { unsatisfiable: size.ContentLength ?? 0 };
        }
        throw error;
      }
    },

    /** The real size of stored bytes, or null when nothing is there. */
    sizeOf,

    /**
     * What arrived at a key: its size and its first `count` bytes (to recognise what it really is),
     * in one ranged GET; null when nothing is there.
     */
    arrived: async (key: string, count: number): Promise<{ size: number; firstBytes: Buffer } | null> => {
      try {
        const object = await internal.send(
          new GetObjectCommand({ Bucket, Key: key, Range: `bytes=0-${count - 1}` }),
        );
        const firstBytes = Buffer.from(await object.Body!.transformToByteArray());
        // A range's answer names the whole size after its slash; a HEAD asks for it should it not.
        const total = /^bytes \d+-\d+\/(\d+)$/.exec(object.ContentRange ?? '')?.[1];
        return { size: total === undefined ? ((await sizeOf(key)) ?? 0) : Number(total), firstBytes };
      } catch (error) {
        // Uploads are at least a byte (their signed Content-Length), so the range always starts inside.
        if (notFound(error)) return null;
        throw error;
      }
    },

    remove: async (key: string): Promise<void> => {
      await internal.send(new DeleteObjectCommand({ Bucket, Key: key }));
    },

    /** Removes up to 1,000 objects in one request (S3's multi-object delete); missing ones are no error. */
    removeMany: async (keys: readonly string[]): Promise<void> => {
      if (keys.length === 0) return;
      const result = await internal.send(
        new DeleteObjectsCommand({ Bucket, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } }),
      );
      const failed = result.Errors ?? [];
      if (failed.length > 0) {
        throw new UpstreamError(
          'MinIO',
          `${failed.length} of ${keys.length} deletes failed: ${failed[0]?.Message}`,
        );
      }
    },
  };
}

export type ObjectStore = ReturnType<typeof createObjectStore>;
