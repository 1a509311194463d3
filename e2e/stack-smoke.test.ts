/**
 * The test stack's servers answer as the control plane expects: ejabberd's API and XMPP WebSocket,
 * LiveKit's health and room service (with the stack's key), MinIO's readiness and presigned URLs.
 * Reads the SVC_* settings that `npm test` (or vitest.config.ts, from .stack/test/control-plane.env)
 * provides.
 */
import { randomUUID } from 'node:crypto';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { RoomServiceClient } from 'livekit-server-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';

function setting(name: string): string {
  const value = process.env[name];
  if (!value)
    throw new Error(`${name} is not set: start the test stack (npm run stack -- up --profile test)`);
  return value;
}

/** Opens a WebSocket and reports the handshake's HTTP status and the negotiated subprotocol. */
function handshake(url: string, protocol: string): Promise<{ status: number; protocol: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, protocol);
    let status = 0;
    socket.once('upgrade', (response) => {
      status = response.statusCode ?? 0;
    });
    socket.once('open', () => {
      resolve({ status, protocol: socket.protocol });
      socket.close();
    });
    socket.once('unexpected-response', (_request, response) =>
      resolve({ status: response.statusCode ?? 0, protocol: '' }),
    );
    socket.once('error', reject);
  });
}

describe('ejabberd', () => {
  it('answers the HTTP API status command', async () => {
    const response = await fetch(`${setting('SVC_EJABBERD_API_URL')}/status`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(response.status).toBe(200);
  });

  it('upgrades an XMPP WebSocket', async () => {
    expect(await handshake(setting('SVC_CHAT_WS_URL'), 'xmpp')).toEqual({ status: 101, protocol: 'xmpp' });
  });
});

describe('LiveKit', () => {
  it('is ready', async () => {
    expect((await fetch(`${setting('SVC_LIVEKIT_URL')}/`)).status).toBe(200);
  });

  it('accepts the stack key on its room service', async () => {
    const rooms = new RoomServiceClient(
      setting('SVC_LIVEKIT_URL'),
      setting('SVC_LIVEKIT_API_KEY'),
      setting('SVC_LIVEKIT_API_SECRET'),
    );
    expect(Array.isArray(await rooms.listRooms())).toBe(true);
  });
});

/** An S3 client as the control plane makes them (docs: integration notes C2 and C3). */
function s3Client(endpoint: string): S3Client {
  return new S3Client({
    endpoint,
    region: setting('SVC_S3_REGION'),
    credentials: { accessKeyId: setting('SVC_S3_ACCESS_KEY'), secretAccessKey: setting('SVC_S3_SECRET_KEY') },
    // MinIO serves no virtual-host buckets (no MINIO_DOMAIN).
    forcePathStyle: true,
    // The defaults would bake the checksum of an empty body into presigned PUT URLs.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

describe('MinIO', () => {
  it('is ready', async () => {
    expect((await fetch(`${setting('SVC_S3_ENDPOINT')}/minio/health/ready`)).status).toBe(200);
  });

  describe('presigned URLs', () => {
    // In a bucket of its own: the API's bucket removes bytes written without a record of the API.
    const key = `e2e-smoke/${randomUUID()}`;
    const body = 'presigned smoke body';
    let bucket: string;
    let internal: S3Client;
    /** Signs for the public endpoint without any network call, as the control plane does. */
    let signer: S3Client;

    beforeAll(async () => {
      bucket = `${setting('SVC_S3_BUCKET')}-smoke`;
      internal = s3Client(setting('SVC_S3_ENDPOINT'));
      signer = s3Client(setting('SVC_S3_PUBLIC_ENDPOINT'));
      await internal.send(new CreateBucketCommand({ Bucket: bucket })).catch((error: Error) => {
        if (error.name !== 'BucketAlreadyOwnedByYou') throw error;
      });
    });

    afterAll(async () => {
      await internal?.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
      await internal?.send(new DeleteBucketCommand({ Bucket: bucket }));
      internal?.destroy();
      signer?.destroy();
    });

    const presignedPut = () =>
      getSignedUrl(signer, new PutObjectCommand({ Bucket: bucket, Key: key, ContentType: 'text/plain' }), {
        expiresIn: 300,
        signableHeaders: new Set(['content-type']),
      });

    it('signs the Content-Type and no checksum into an upload URL', async () => {
      const url = new URL(await presignedPut());
      expect(url.searchParams.get('X-Amz-SignedHeaders')).toBe('content-type;host');
      expect([...url.searchParams.keys()].filter((name) => /checksum/i.test(name))).toEqual([]);
    });

    it('refuses an upload with another Content-Type than the signed one', async () => {
      const response = await fetch(await presignedPut(), {
        method: 'PUT',
        headers: { 'content-type': 'image/png' },
        body,
      });
      expect(response.status).toBe(403);
      expect(await response.text()).toContain('SignatureDoesNotMatch');
    });

    it('stores an upload with the signed Content-Type', async () => {
      const response = await fetch(await presignedPut(), {
        method: 'PUT',
        headers: { 'content-type': 'text/plain' },
        body,
      });
      expect(response.status, await response.text()).toBe(200);
      const head = await internal.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      expect(head).toMatchObject({ ContentType: 'text/plain', ContentLength: Buffer.byteLength(body) });
    });

    // Reads the object the upload above stored.
    it('answers a Range request on a download URL with 206', async () => {
      const url = await getSignedUrl(signer, new GetObjectCommand({ Bucket: bucket, Key: key }), {
        expiresIn: 300,
      });
      const response = await fetch(url, { headers: { range: 'bytes=10-14' } });
      expect(response.status).toBe(206);
      expect(response.headers.get('content-range')).toBe(`bytes 10-14/${Buffer.byteLength(body)}`);
      expect(await response.text()).toBe(body.slice(10, 15));
    });
  });
});
