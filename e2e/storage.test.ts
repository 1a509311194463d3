/**
 * Storage through the running control plane and MinIO, with a plain HTTP client for the bytes: a
 * 1 GiB upload through the presigned URL, and an object removed behind the API's back (as a
 * lifecycle rule does) losing its record through MinIO's bucket events.
 */
import { DeleteObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Container } from '../control-plane/src/container.js';
import { api, createCustomer, openContainer, stackSettings } from './support/stack.js';

let container: Container;
beforeAll(async () => {
  container = await openContainer();
});
afterAll(async () => {
  await container.close();
});

interface Upload {
  object: { id: string };
  upload_url: string;
  upload_headers: Record<string, string>;
}

/** `size` bytes produced as they are sent, so a 1 GiB body never sits in memory. */
function generatedBody(size: number): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(1024 * 1024).fill(42);
  let sent = 0;
  return new ReadableStream({
    pull(controller) {
      if (sent >= size) {
        controller.close();
        return;
      }
      const next = chunk.subarray(0, Math.min(chunk.length, size - sent));
      sent += next.length;
      controller.enqueue(next);
    },
  });
}

describe('storage through the presigned URL', () => {
  it('takes a 1 GiB upload and reports its real size on completion', { timeout: 180_000 }, async () => {
    const customer = await createCustomer(container, { mode: 'live', balanceMicros: 1_000_000 });
    const size = 1024 ** 3;
    const { status, body: upload } = await api<Upload>(customer, 'POST', '/v1/storage/uploads', {
      name: 'big.zip',
      content_type: 'application/zip',
      size_bytes: size,
    });
    expect(status).toBe(201);
    const put = await fetch(upload.upload_url, {
      method: 'PUT',
      // As upload_headers say (a streamed body needs its Content-Length set by hand).
      headers: {
        'content-type': upload.upload_headers['Content-Type']!,
        'content-length': upload.upload_headers['Content-Length']!,
        'if-none-match': upload.upload_headers['If-None-Match']!,
      },
      body: generatedBody(size),
      duplex: 'half',
    } as RequestInit);
    expect(put.status).toBe(200);
    const completed = await api<{ status: string; size_bytes: number }>(
      customer,
      'POST',
      `/v1/storage/objects/${upload.object.id}/complete`,
    );
    expect(completed.body).toMatchObject({ status: 'ready', size_bytes: size });
    expect((await api(customer, 'DELETE', `/v1/storage/objects/${upload.object.id}`)).status).toBe(200);
  });

  it('forgets an object that disappears from MinIO behind the API’s back', async () => {
    const customer = await createCustomer(container);
    const { body: upload } = await api<Upload>(customer, 'POST', '/v1/storage/uploads', {
      name: 'gone.txt',
      content_type: 'text/plain',
      size_bytes: 4,
    });
    await fetch(upload.upload_url, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain', 'if-none-match': '*' },
      body: 'gone',
    });
    expect((await api(customer, 'POST', `/v1/storage/objects/${upload.object.id}/complete`)).status).toBe(
      200,
    );

    const settings = stackSettings();
    const s3 = new S3Client({
      endpoint: settings.SVC_S3_ENDPOINT,
      region: settings.SVC_S3_REGION,
      forcePathStyle: true,
      credentials: { accessKeyId: settings.SVC_S3_ACCESS_KEY, secretAccessKey: settings.SVC_S3_SECRET_KEY },
    });
    const key = new URL(upload.upload_url).pathname.split('/').slice(2).join('/');
    await s3.send(new DeleteObjectCommand({ Bucket: settings.SVC_S3_BUCKET, Key: decodeURIComponent(key) }));

    let status = 0;
    for (let attempt = 0; attempt < 50 && status !== 404; attempt += 1) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      status = (await api(customer, 'GET', `/v1/storage/objects/${upload.object.id}`)).status;
    }
    expect(status).toBe(404);
  });
});
