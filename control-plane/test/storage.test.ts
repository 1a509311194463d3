/**
 * Storage against the real MinIO: the API reserves and signs, and the bytes travel with a plain
 * HTTP client (fetch), as a browser or an app would send them.
 */
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { Interceptor } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createObjectStore } from '../src/adapters/s3.js';
import { objectStoreSettings } from '../src/container.js';
import { TEST_OBJECT_DAYS } from '../src/modules/storage/schema.js';
import { storageKeyOf } from '../src/modules/storage/service.js';
import { createManualClock } from '../src/platform/clock.js';
import { UpstreamError } from '../src/platform/errors.js';
import { READABLE_NAMES, REFUSED_NAMES } from './identities.js';
import { callWithKey, createCustomer, startTestApp, type TestContext } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
  await ctx.container.objects.ensureBucket({ testPrefix: 'test/', testObjectDays: TEST_OBJECT_DAYS });
});
afterAll(async () => {
  await ctx.close();
});

const call = (token: string, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
  callWithKey(ctx.app, token, method, url, payload);

interface Upload {
  object: { id: string; status: string; size_bytes: number };
  upload_url: string;
  upload_headers: Record<string, string>;
}

async function reserve(
  token: string,
  input: Partial<{ name: string; content_type: string; size_bytes: number; metadata: object }>,
) {
  return call(token, 'POST', '/v1/storage/uploads', {
    name: 'clip.mp4',
    content_type: 'video/mp4',
    size_bytes: 11,
    ...input,
  });
}

/** PUTs as a client following upload_headers does (fetch sets Content-Length from the body). */
const put = (upload: Upload, body: string | Buffer, contentType = upload.upload_headers['Content-Type']!) =>
  fetch(upload.upload_url, {
    method: 'PUT',
    headers: { 'content-type': contentType, 'if-none-match': upload.upload_headers['If-None-Match']! },
    body,
  });

/** Waits until MinIO no longer has the key (the control plane acts on MinIO's event). */
async function gone(storageKey: string): Promise<boolean> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if ((await ctx.container.objects.sizeOf(storageKey)) === null) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

async function storeReady(token: string, bytes: Buffer, contentType = 'application/pdf', name = 'doc.pdf') {
  const upload = (
    await reserve(token, { name, content_type: contentType, size_bytes: bytes.length })
  ).json() as Upload;
  expect((await put(upload, bytes)).status).toBe(200);
  const completed = await call(token, 'POST', `/v1/storage/objects/${upload.object.id}/complete`);
  expect(completed.statusCode).toBe(200);
  return upload.object.id;
}

describe('uploads', () => {
  it('reserve a pending object with a URL that only takes the declared Content-Type', async () => {
    const { token } = await createCustomer(ctx.container);
    const reserved = await reserve(token, { metadata: { album: 'summer', take: '3' } });
    expect(reserved.statusCode).toBe(201);
    const upload = reserved.json();
    expect(upload).toMatchObject({
      object: {
        status: 'pending',
        name: 'clip.mp4',
        content_type: 'video/mp4',
        size_bytes: 11,
        metadata: { album: 'summer', take: '3' },
      },
      upload_method: 'PUT',
      upload_headers: { 'Content-Type': 'video/mp4', 'Content-Length': '11', 'If-None-Match': '*' },
      expires_in: 900,
    });
    expect(new URL(upload.upload_url).origin).toBe(
      new URL(ctx.container.settings.SVC_S3_PUBLIC_ENDPOINT).origin,
    );
    expect(upload.upload_url).toContain(
      'X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost%3Bif-none-match',
    );
    expect(reserved.headers['x-svc-cost-usd']).toBe('0.000000');

    expect((await put(upload, 'hello video', 'video/webm')).status).toBe(403);
    expect((await put(upload, 'hello video')).status).toBe(200);
    const completed = await call(token, 'POST', `/v1/storage/objects/${upload.object.id}/complete`);
    expect(completed.json()).toMatchObject({ id: upload.object.id, status: 'ready', size_bytes: 11 });
  });

  it('take exactly the declared size, once: no other size, no second upload over the first', async () => {
    const { token } = await createCustomer(ctx.container);
    const upload = (await reserve(token, { size_bytes: 5 })).json();
    const missing = await call(token, 'POST', `/v1/storage/objects/${upload.object.id}/complete`);
    expect(missing.statusCode).toBe(409);
    expect(missing.json().error.message).toMatch(/has not arrived/);
    // The size is signed in: a byte more, a byte less or a mebibyte are refused by MinIO itself.
    for (const body of ['six b!', 'four', Buffer.alloc(1 << 20)])
      expect((await put(upload, body)).status).toBe(403);
    expect((await call(token, 'POST', `/v1/storage/objects/${upload.object.id}/complete`)).statusCode).toBe(
      409,
    );
    expect((await put(upload, 'five!')).status).toBe(200);
    // Written once: the same URL cannot replace the bytes, before completion or after.
    expect((await put(upload, 'FIVE!')).status).toBe(412);
    const completed = await call(token, 'POST', `/v1/storage/objects/${upload.object.id}/complete`);
    expect(completed.json()).toMatchObject({ status: 'ready', size_bytes: 5 });
    expect((await put(upload, 'FIVE!')).status).toBe(412);
    const read = (await call(token, 'GET', `/v1/storage/objects/${upload.object.id}`)).json();
    expect(await (await fetch(read.url)).text()).toBe('five!');
    // Past the first bytes completion reads to check the type: the size is the whole object's.
    const bigger = await storeReady(token, Buffer.alloc(3_000, 7));
    expect((await call(token, 'GET', `/v1/storage/objects/${bigger}`)).json().size_bytes).toBe(3_000);
  });

  it('remove bytes written without a record: an old upload URL of a deleted object, a stray key', async () => {
    const { token, app } = await createCustomer(ctx.container);
    const upload = (await reserve(token, { size_bytes: 4 })).json() as Upload;
    expect((await put(upload, 'once')).status).toBe(200);
    await call(token, 'POST', `/v1/storage/objects/${upload.object.id}/complete`);
    expect((await call(token, 'DELETE', `/v1/storage/objects/${upload.object.id}`)).statusCode).toBe(200);
    // The key is free again, so MinIO takes the PUT; nothing would ever bill or sweep these bytes.
    expect((await put(upload, 'back')).status).toBe(200);
    expect(await gone(storageKeyOf('test', app.id, upload.object.id))).toBe(true);

    // Written straight into the bucket, as an operator or a leaked credential could.
    const stray = storageKeyOf('test', app.id, 'obj_never_reserved');
    const { settings } = ctx.container;
    const s3 = new S3Client({
      endpoint: settings.SVC_S3_ENDPOINT,
      region: settings.SVC_S3_REGION,
      forcePathStyle: true,
      credentials: { accessKeyId: settings.SVC_S3_ACCESS_KEY, secretAccessKey: settings.SVC_S3_SECRET_KEY },
    });
    try {
      await s3.send(new PutObjectCommand({ Bucket: settings.SVC_S3_BUCKET, Key: stray, Body: 'stray' }));
    } finally {
      s3.destroy();
    }
    expect(await gone(stray)).toBe(true);
  });

  it.each([
    ['text/html', 'content_type'],
    ['image/svg+xml', 'content_type'],
    ['application/x-msdownload', 'content_type'],
    ['Video/MP4', 'content_type'],
  ])('refuse content type %s', async (contentType, field) => {
    const { token } = await createCustomer(ctx.container);
    const response = await reserve(token, { content_type: contentType });
    expect(response.statusCode).toBe(422);
    expect(response.json().error.fields[0].field).toBe(field);
  });

  it.each([...Object.entries(REFUSED_NAMES), ['a slash', 'a/clip.mp4']])(
    'refuse a file name with %s',
    async (_case, name) => {
      const { token } = await createCustomer(ctx.container);
      const response = await reserve(token, { name });
      expect(response.statusCode).toBe(422);
      expect(response.json().error.fields[0].field).toBe('name');
    },
  );

  it('take file names of any script', async () => {
    const { token } = await createCustomer(ctx.container);
    for (const name of READABLE_NAMES)
      expect((await reserve(token, { name, content_type: 'application/pdf' })).json().object.name).toBe(name);
  });

  it.each([
    'image/png',
    'image/jpeg',
    'video/webm',
    'video/quicktime',
    'video/x-matroska',
    'audio/mpeg',
    'application/pdf',
    'application/json',
    'text/csv',
    'text/plain',
    'text/vtt',
    'application/zip',
  ])('accept content type %s', async (contentType) => {
    const { token } = await createCustomer(ctx.container);
    expect((await reserve(token, { content_type: contentType, name: 'file' })).statusCode).toBe(201);
  });

  it('refuse HTML and SVG whatever they are called or declared as', async () => {
    const { token } = await createCustomer(ctx.container);
    for (const name of ['page.html', 'x.HTM', 'logo.svg']) {
      const response = await reserve(token, { name, content_type: 'text/plain' });
      expect(response.statusCode).toBe(422);
      expect(response.json().error.fields[0]).toMatchObject({ field: 'name' });
    }
    const svg = Buffer.from(
      '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
    );
    const upload = (
      await reserve(token, { name: 'photo.png', content_type: 'image/png', size_bytes: svg.length })
    ).json();
    await put(upload, svg);
    const refused = await call(token, 'POST', `/v1/storage/objects/${upload.object.id}/complete`);
    expect(refused.statusCode).toBe(422);
    expect(refused.json().error.fields[0].message).toMatch(/HTML or SVG/);
    expect((await call(token, 'GET', `/v1/storage/objects/${upload.object.id}`)).statusCode).toBe(404);
  });

  it('take sizes up to 5 GiB and up to 20 metadata pairs', async () => {
    const { token } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    expect((await reserve(token, { size_bytes: 5 * 1024 ** 3 })).statusCode).toBe(201);
    expect((await reserve(token, { size_bytes: 5 * 1024 ** 3 + 1 })).json().error.fields[0]).toMatchObject({
      field: 'size_bytes',
      message: 'must be <= 5368709120',
    });
    expect((await reserve(token, { size_bytes: 0 })).statusCode).toBe(422);
    const pairs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, 'v']));
    expect((await reserve(token, { metadata: pairs(20) })).statusCode).toBe(201);
    expect((await reserve(token, { metadata: pairs(21) })).json().error.fields[0].field).toBe('metadata');
    expect((await reserve(token, { metadata: { k: { nested: true } } })).statusCode).toBe(422);
    expect((await reserve(token, { metadata: { 'bad key': 'v' } })).statusCode).toBe(422);
  });

  it('keep test keys within 1 GB per app, at the byte', async () => {
    const { token } = await createCustomer(ctx.container);
    expect((await reserve(token, { size_bytes: 600_000_000 })).statusCode).toBe(201);
    expect((await reserve(token, { size_bytes: 400_000_000 })).statusCode).toBe(201);
    const over = await reserve(token, { size_bytes: 1 });
    expect(over.statusCode).toBe(403);
    expect(over.json().error).toMatchObject({
      code: 'QUOTA_EXCEEDED',
      message: expect.stringMatching(/0 bytes are left/),
    });
  });
});

describe('reads', () => {
  it('sign a URL that answers Range requests, and download=true makes it an attachment', async () => {
    const { token } = await createCustomer(ctx.container);
    const id = await storeReady(token, Buffer.from('0123456789abcdef'), 'text/plain', 'notes ü.txt');
    const read = await call(token, 'GET', `/v1/storage/objects/${id}?expires_in=60`);
    expect(read.statusCode).toBe(200);
    expect(read.json()).toMatchObject({ id, status: 'ready', size_bytes: 16, expires_in: 60 });
    expect(read.headers['x-svc-cost-usd']).toBe('0.000000');
    const range = await fetch(read.json().url, { headers: { range: 'bytes=4-9' } });
    expect(range.status).toBe(206);
    expect(await range.text()).toBe('456789');

    const download = await call(token, 'GET', `/v1/storage/objects/${id}?download=true`);
    const file = await fetch(download.json().url);
    expect(file.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''notes%20%C3%BC.txt");
    const tampered = download.json().url.replace('X-Amz-Expires=3600', 'X-Amz-Expires=7200');
    expect((await fetch(tampered)).status).toBe(403);
  });

  it('take expires_in from 60 to 604,800 seconds', async () => {
    const { token } = await createCustomer(ctx.container);
    const id = await storeReady(token, Buffer.from('x'));
    for (const seconds of [60, 604_800])
      expect((await call(token, 'GET', `/v1/storage/objects/${id}?expires_in=${seconds}`)).statusCode).toBe(
        200,
      );
    for (const seconds of [59, 604_801])
      expect((await call(token, 'GET', `/v1/storage/objects/${id}?expires_in=${seconds}`)).statusCode).toBe(
        422,
      );
  });

  it('list newest first, a page at a time, with a status filter', async () => {
    const { token } = await createCustomer(ctx.container);
    const ids: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      ctx.clock.advance(1_000);
      ids.push((await reserve(token, { name: `f${i}` })).json().object.id);
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const response = await call(
        token,
        'GET',
        `/v1/storage/objects?limit=2${cursor ? `&cursor=${cursor}` : ''}`,
      );
      const page = response.json() as { items: { id: string }[]; next_cursor: string | null };
      seen.push(...page.items.map((item: { id: string }) => item.id));
      cursor = page.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...ids].reverse());
    expect((await call(token, 'GET', '/v1/storage/objects?status=ready')).json()).toEqual({
      items: [],
      next_cursor: null,
    });
    for (const limit of [0, 201])
      expect((await call(token, 'GET', `/v1/storage/objects?limit=${limit}`)).statusCode).toBe(422);
    expect((await call(token, 'GET', '/v1/storage/objects?limit=200')).statusCode).toBe(200);
    expect((await call(token, 'GET', '/v1/storage/objects?cursor=bogus')).statusCode).toBe(422);
    ctx.clock.set(new Date());
  });
});

describe('removal and isolation', () => {
  it('deletes bytes and record: issued URLs stop working', async () => {
    const { token } = await createCustomer(ctx.container);
    const id = await storeReady(token, Buffer.from('bye'));
    const url = (await call(token, 'GET', `/v1/storage/objects/${id}`)).json().url;
    expect((await fetch(url)).status).toBe(200);
    expect((await call(token, 'DELETE', `/v1/storage/objects/${id}`)).json()).toEqual({ ok: true, id });
    expect((await fetch(url)).status).toBe(404);
    expect((await call(token, 'GET', `/v1/storage/objects/${id}`)).statusCode).toBe(404);
  });

  it('hides another app’s objects, and live objects from the same app’s test key', async () => {
    const owner = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const id = await storeReady(owner.token, Buffer.from('secret'));
    const stranger = await createCustomer(ctx.container);
    const sameAppTest = await ctx.container.accounts.createKey({
      appId: owner.app.id,
      kind: 'secret',
      mode: 'test',
    });
    for (const token of [stranger.token, sameAppTest.token]) {
      for (const [method, url] of [
        ['GET', `/v1/storage/objects/${id}`],
        ['POST', `/v1/storage/objects/${id}/complete`],
        ['DELETE', `/v1/storage/objects/${id}`],
      ] as const) {
        expect((await call(token, method, url)).statusCode).toBe(404);
      }
    }
    expect((await call(owner.token, 'GET', `/v1/storage/objects/${id}`)).statusCode).toBe(200);
  });
});

describe('MinIO refusing the control plane', () => {
  it('is the service unavailable (503), not the caller’s doing, even when it says nothing', async () => {
    const configured = objectStoreSettings(ctx.container.settings);
    const refused = createObjectStore({ ...configured, secretKey: `${configured.secretKey}-not` });
    // A HEAD's 403 has no body: the SDK can only call it 'Unknown'.
    await expect(refused.sizeOf('test/anything')).rejects.toBeInstanceOf(UpstreamError);
  });
});

describe('expiry', () => {
  it('removes pending uploads after a day and test objects after 7 days, bytes and records', async () => {
    const { token } = await createCustomer(ctx.container);
    const start = new Date();
    ctx.clock.set(start);
    const pending = (await reserve(token, { name: 'never-finished' })).json().object.id as string;
    const kept = await storeReady(token, Buffer.from('kept'));
    const url = (await call(token, 'GET', `/v1/storage/objects/${kept}`)).json().url;

    ctx.clock.set(new Date(start.getTime() + 86_400_000 - 1_000));
    await ctx.container.storage.sweep();
    expect((await call(token, 'GET', '/v1/storage/objects')).json().items).toHaveLength(2);
    ctx.clock.set(new Date(start.getTime() + 86_400_000 + 1_000));
    await ctx.container.storage.sweep();
    expect(
      (await call(token, 'GET', '/v1/storage/objects')).json().items.map((o: { id: string }) => o.id),
    ).toEqual([kept]);
    expect(pending).toBeTruthy();

    ctx.clock.set(new Date(start.getTime() + 7 * 86_400_000 + 1_000));
    await ctx.container.storage.sweep();
    expect((await call(token, 'GET', '/v1/storage/objects')).json().items).toEqual([]);
    expect((await fetch(url)).status).toBe(404);
    ctx.clock.set(new Date());
  });
});

describe('storage metering', () => {
  it('prices each upload and each signed URL, and meters stored bytes once a day', async () => {
    const priced = await startTestApp({
      settings: { SVC_FREE_ALLOWANCES: 'storage.uploads=0,storage.signed_urls=0,storage.gb_days=0' },
    });
    try {
      priced.clock.set('2036-09-10T12:00:00Z');
      const { token, account } = await createCustomer(priced.container, {
        mode: 'live',
        balanceMicros: 1_000_000,
      });
      const send = (method: 'GET' | 'POST', url: string, payload?: object) =>
        callWithKey(priced.app, token, method, url, payload);
      const bytes = Buffer.alloc(2_500_000, 7);
      const reserved = await send('POST', '/v1/storage/uploads', {
        name: 'a.pdf',
        content_type: 'application/pdf',
        size_bytes: bytes.length,
      });
      expect(reserved.headers['x-svc-cost-usd']).toBe('0.000100');
      const upload = reserved.json() as Upload;
      await put(upload, bytes);
      await send('POST', `/v1/storage/objects/${upload.object.id}/complete`);
      expect((await send('GET', `/v1/storage/objects/${upload.object.id}`)).headers['x-svc-cost-usd']).toBe(
        '0.000010',
      );
      // A priced read has no HEAD: it would charge for a URL nobody receives (counted below: one).
      const head = await priced.app.inject({
        method: 'HEAD',
        url: `/v1/storage/objects/${upload.object.id}`,
        headers: { authorization: `Bearer ${token}` },
      });
      expect(head.statusCode).toBe(405);

      await priced.container.storage.meterStoredBytes();
      await priced.container.storage.meterStoredBytes();
      priced.clock.set('2036-09-11T00:00:01Z');
      await priced.container.storage.meterStoredBytes();
      const usage = await priced.container.billing.usageReport(account.id, 'live', 2);
      const stored = usage.usage.filter((row) => row.metric === 'gb_days');
      expect(stored.map((row) => [row.day, row.quantity])).toEqual([
        ['2036-09-11', 0.0025],
        ['2036-09-10', 0.0025],
      ]);
      expect(usage.usage.find((row) => row.metric === 'uploads')).toMatchObject({
        quantity: 1,
        cost_micros: 100,
      });
      expect(usage.usage.find((row) => row.metric === 'signed_urls')).toMatchObject({
        quantity: 1,
        cost_micros: 10,
      });
    } finally {
      await priced.close();
    }
  });

  it('bills stored bytes to the day it claimed when its run crosses midnight', async () => {
    const clock = createManualClock('2036-09-12T23:59:59.900Z');
    // Midnight passes while the run claims the day of an app, before it meters it.
    const midnight: Interceptor = {
      name: 'midnight-during-the-claim',
      beforeQueryExecution: (_context, query) => {
        if (query.sql.includes('insert into storage_metered_days')) clock.set('2036-09-13T00:00:00.100Z');
        return null;
      },
    };
    const priced = await startTestApp({
      clock,
      interceptors: [midnight],
      settings: { SVC_FREE_ALLOWANCES: 'storage.gb_days=0' },
    });
    try {
      const { token, account } = await createCustomer(priced.container, {
        mode: 'live',
        balanceMicros: 1_000_000,
      });
      const bytes = Buffer.alloc(1_000_000, 7);
      const upload = (
        await callWithKey(priced.app, token, 'POST', '/v1/storage/uploads', {
          name: 'b.pdf',
          content_type: 'application/pdf',
          size_bytes: bytes.length,
        })
      ).json() as Upload;
      await put(upload, bytes);
      await callWithKey(priced.app, token, 'POST', `/v1/storage/objects/${upload.object.id}/complete`);
      clock.set('2036-09-12T23:59:59.900Z');
      await priced.container.storage.meterStoredBytes();
      const usage = await priced.container.billing.usageReport(account.id, 'live', 3);
      const stored = usage.usage.filter((row) => row.metric === 'gb_days');
      expect(stored.map((row) => [row.day, row.quantity])).toEqual([['2036-09-12', 0.001]]);
    } finally {
      await priced.close();
    }
  });
});
