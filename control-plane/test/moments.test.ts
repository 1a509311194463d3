/**
 * Moments against the real MinIO, ffprobe and ffmpeg: real MP4 and WebM files a user uploads and
 * publishes, checked and measured from their bytes, with a thumbnail that decodes; files that are not
 * videos refused; public URLs that answer Range requests without a key and stop with the moment;
 * likes, comments, daily views, the event, and who may do what.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SANDBOX_CLIPS } from '../src/modules/media/sandbox.js';
import { MOMENT_VIDEO } from '../src/modules/media/schema.js';
import { SANDBOX_MOMENTS } from '../src/modules/social/moments-sandbox.js';
import { TEST_OBJECT_DAYS } from '../src/modules/storage/schema.js';
import { inTransaction } from '../src/platform/transaction.js';
import { photo, probeBytes, sideways, upload, video } from './media-files.js';
import { callWithKey, createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

const WRITE_COST = '0.000500';
const FREE = '0.000000';

let ctx: TestContext;
let key: string;
let keyId: string;
let appId: string;
let mp4: Buffer;
let webm: Buffer;

beforeAll(async () => {
  ctx = await startTestApp();
  await ctx.container.objects.ensureBucket({ testPrefix: 'test/', testObjectDays: TEST_OBJECT_DAYS });
  const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 10_000_000 });
  key = customer.token;
  keyId = customer.key.id;
  appId = customer.app.id;
  [mp4, webm] = await Promise.all([video('mp4', '640x360', 3), video('webm', '360x640', 2)]);
});
afterAll(async () => {
  await ctx.close();
});

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
const tag = () => randomBytes(4).toString('hex');

function asUser(token: string, method: Method, url: string, payload?: object) {
  return ctx.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: uniqueAddress(),
    ...(payload ? { payload } : {}),
  });
}

async function tokenFor(userId: string, appKey = key): Promise<string> {
  const minted = await callWithKey(ctx.app, appKey, 'POST', `/v1/users/${userId}/tokens`, {});
  expect(minted.statusCode, minted.body).toBe(200);
  return minted.json().token;
}

/** A user of the app (of the file's live key unless told) with a token, and a profile unless told otherwise. */
async function user(withProfile = true, appKey = key) {
  const userId = `user-${tag()}`;
  const token = await tokenFor(userId, appKey);
  const username = `u_${tag()}`;
  if (withProfile) {
    const put = await asUser(token, 'PUT', '/v1/me/profile', { username });
    expect(put.statusCode, put.body).toBe(200);
  }
  return { userId, token, username, credential: { kind: 'user' as const, token } };
}

/** The path of a media URL, for a keyless request through the app. */
const pathOf = (url: string) => new URL(url).pathname;
const fetchMedia = (url: string, headers: Record<string, string> = {}) =>
  ctx.app.inject({ method: 'GET', url: pathOf(url), headers });

async function publish(
  author: { token: string; credential: { kind: 'user'; token: string } },
  bytes: Buffer,
  type: string,
) {
  ctx.clock.advance(1);
  const objectId = await upload(ctx.app, author.credential, bytes, type, 'clip');
  const published = await asUser(author.token, 'POST', '/v1/me/moments', {
    object_id: objectId,
    caption: 'hello',
  });
  return { objectId, published };
}

function expectInvalidObject(reply: Awaited<ReturnType<typeof asUser>>, words: RegExp) {
  expect(reply.statusCode, reply.body).toBe(422);
  const [field] = reply.json().error.fields;
  expect(field).toMatchObject({ in: 'body', field: 'object_id' });
  expect(field.message).toMatch(words);
}

describe('publishing a moment', () => {
  it('reads an MP4’s size and length from the file, makes a thumbnail, and costs one write', async () => {
    const author = await user();
    const { published } = await publish(author, mp4, 'video/mp4');
    expect(published.statusCode, published.body).toBe(200);
    expect(published.headers['x-svc-cost-usd']).toBe(WRITE_COST);
    const moment = published.json();
    expect(moment).toEqual({
      id: expect.stringMatching(/^mom_/),
      author_id: author.userId,
      author_username: author.username,
      caption: 'hello',
      media_type: 'video',
      video_url: expect.stringMatching(/\/media\/med_\w+$/),
      thumbnail_url: expect.stringMatching(/\/media\/med_\w+\/thumbnail$/),
      width: 640,
      height: 360,
      duration_ms: 3000,
      like_count: 0,
      comment_count: 0,
      view_count: 0,
      created_at: expect.any(String),
    });
    const thumbnail = await fetchMedia(moment.thumbnail_url);
    expect(thumbnail.statusCode).toBe(200);
    expect(thumbnail.headers['content-type']).toBe('image/jpeg');
    expect(await probeBytes(thumbnail.rawPayload)).toEqual({ codec_name: 'mjpeg', width: 640, height: 360 });
  });

  it('reads a portrait WebM, and turns a sideways phone video upright', async () => {
    const author = await user();
    const portrait = (await publish(author, webm, 'video/webm')).published;
    expect(portrait.statusCode, portrait.body).toBe(200);
    expect(portrait.json()).toMatchObject({ width: 360, height: 640, duration_ms: expect.any(Number) });
    expect(Math.abs(portrait.json().duration_ms - 2000)).toBeLessThan(100);
    const thumb = await probeBytes((await fetchMedia(portrait.json().thumbnail_url)).rawPayload);
    expect(thumb).toEqual({ codec_name: 'mjpeg', width: 360, height: 640 });

    const turned = (await publish(author, await sideways(await video('mp4', '640x360', 1)), 'video/mp4'))
      .published;
    expect(turned.statusCode, turned.body).toBe(200);
    expect(turned.json()).toMatchObject({ width: 360, height: 640 });
    expect(await probeBytes((await fetchMedia(turned.json().thumbnail_url)).rawPayload)).toMatchObject({
      width: 360,
      height: 640,
    });
  });

  it('refuses a text file renamed .mp4, a photo, an HTML page and a video over three minutes', async () => {
    const author = await user();
    expectInvalidObject(
      (await publish(author, Buffer.from('just some text, not a video at all\n'), 'video/mp4')).published,
      /not a video/,
    );
    expectInvalidObject(
      (await publish(author, await photo('320x240'), 'video/mp4')).published,
      /not a video/,
    );
    // HTML past the first bytes storage sniffs: ffprobe finds no video in it.
    const page = Buffer.from(`${' '.repeat(2_000)}<!DOCTYPE html><html><body>hi</body></html>`);
    expectInvalidObject((await publish(author, page, 'video/webm')).published, /not a video/);
    expectInvalidObject(
      (await publish(author, await video('mp4', '64x64', 181), 'video/mp4')).published,
      /at most 180 s/,
    );
    // Refusals are not charged, and publish nothing.
    const list = await callWithKey(ctx.app, key, 'GET', `/v1/moments?author=${author.username}`);
    expect(list.json().items).toEqual([]);
  });

  it('refuses an HTML page at upload, so it never becomes a moment', async () => {
    const author = await user();
    const html = Buffer.from('<!DOCTYPE html><html><body><script>alert(1)</script></body></html>');
    await expect(upload(ctx.app, author.credential, html, 'video/mp4')).rejects.toMatchObject({
      reply: { statusCode: 422 },
    });
  });

  it('takes an empty caption; users upload videos only', async () => {
    const author = await user();
    const objectId = await upload(ctx.app, author.credential, webm, 'video/webm');
    const published = await asUser(author.token, 'POST', '/v1/me/moments', {
      object_id: objectId,
      caption: '',
    });
    expect(published.statusCode, published.body).toBe(200);
    expect(published.json().caption).toBe('');
    const pdf = await asUser(author.token, 'POST', '/v1/me/storage/uploads', {
      name: 'doc.pdf',
      content_type: 'application/pdf',
      size_bytes: 100,
    });
    expect(pdf.statusCode).toBe(422);
    expect(pdf.json().error.fields[0]).toMatchObject({ in: 'body', field: 'content_type' });
    const huge = await asUser(author.token, 'POST', '/v1/me/storage/uploads', {
      name: 'long.mp4',
      content_type: 'video/mp4',
      size_bytes: 2 * 1024 ** 3 + 1,
    });
    expect(huge.statusCode).toBe(422);
    expect(huge.json().error.fields[0]).toMatchObject({ in: 'body', field: 'size_bytes' });
  });

  it('takes only the user’s own ready object, and needs a profile', async () => {
    const [author, other] = [await user(), await user()];
    const theirs = await upload(ctx.app, other.credential, mp4, 'video/mp4');
    const theApps = await upload(ctx.app, { kind: 'key', token: key }, mp4, 'video/mp4');
    for (const objectId of [theirs, theApps, 'obj_doesnotexist']) {
      const reply = await asUser(author.token, 'POST', '/v1/me/moments', { object_id: objectId });
      expect(reply.statusCode, reply.body).toBe(404);
      expect(reply.headers['x-svc-cost-usd']).toBe(FREE);
    }
    const pending = await asUser(author.token, 'POST', '/v1/me/storage/uploads', {
      name: 'later.mp4',
      content_type: 'video/mp4',
      size_bytes: mp4.length,
    });
    const early = await asUser(author.token, 'POST', '/v1/me/moments', {
      object_id: pending.json().object.id,
    });
    expect(early.statusCode, early.body).toBe(409);

    const noProfile = await user(false);
    const own = await upload(ctx.app, noProfile.credential, mp4, 'video/mp4');
    const refused = await asUser(noProfile.token, 'POST', '/v1/me/moments', { object_id: own });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error.code).toBe('PROFILE_REQUIRED');
  });
});

describe('a moment’s media', () => {
  it('plays without a key, answers Range requests, and stops with the moment', async () => {
    const author = await user();
    const { objectId, published } = await publish(author, mp4, 'video/mp4');
    const moment = published.json();

    const whole = await fetchMedia(moment.video_url);
    expect(whole.statusCode).toBe(200);
    expect(whole.headers).toMatchObject({
      'content-type': 'video/mp4',
      'accept-ranges': 'bytes',
      'content-length': String(mp4.length),
    });
    expect(whole.rawPayload.equals(mp4)).toBe(true);
    const part = await fetchMedia(moment.video_url, { range: 'bytes=100-199' });
    expect(part.statusCode).toBe(206);
    expect(part.headers['content-range']).toBe(`bytes 100-199/${mp4.length}`);
    expect(part.rawPayload.equals(mp4.subarray(100, 200))).toBe(true);
    const tail = await fetchMedia(moment.video_url, { range: 'bytes=-10' });
    expect(tail.rawPayload.equals(mp4.subarray(-10))).toBe(true);
    // No HEAD (fastify would read, and meter, the whole file to answer one): 405, GET allowed.
    const head = await ctx.app.inject({ method: 'HEAD', url: pathOf(moment.video_url) });
    expect(head.statusCode).toBe(405);
    expect(head.headers.allow).toBe('GET');
    const outside = await fetchMedia(moment.video_url, { range: `bytes=${mp4.length + 10}-` });
    expect(outside.statusCode).toBe(416);
    expect(outside.headers['content-range']).toBe(`bytes */${mp4.length}`);

    // The object cannot be removed under the moment.
    const removeObject = () => callWithKey(ctx.app, key, 'DELETE', `/v1/storage/objects/${objectId}`);
    const inUse = await removeObject();
    expect(inUse.statusCode, inUse.body).toBe(409);
    expect(inUse.json().error.code).toBe('OBJECT_IN_USE');

    const other = await user();
    expect((await asUser(other.token, 'DELETE', `/v1/me/moments/${moment.id}`)).statusCode).toBe(404);
    const deleted = await asUser(author.token, 'DELETE', `/v1/me/moments/${moment.id}`);
    expect(deleted.statusCode, deleted.body).toBe(200);
    expect(deleted.json()).toEqual({ ok: true, id: moment.id });
    expect((await fetchMedia(moment.video_url)).statusCode).toBe(404);
    expect((await fetchMedia(moment.thumbnail_url)).statusCode).toBe(404);
    expect((await callWithKey(ctx.app, key, 'GET', `/v1/moments/${moment.id}`)).statusCode).toBe(404);
    // Now the object can go.
    expect((await removeObject()).statusCode).toBe(200);
  });

  it('frees storage’s connection when a viewer goes away mid-download', async () => {
    const author = await user();
    // Big enough that MinIO's response is still streaming when the viewer leaves.
    const long = await video('mp4', '1280x720', 20);
    const moment = (await publish(author, long, 'video/mp4')).published.json();
    const address = await ctx.app.listen({ port: 0, host: '127.0.0.1' });
    const url = `${address}${pathOf(moment.video_url)}`;
    // More abandoned downloads than the S3 client has sockets (50): each must give its socket back.
    for (let i = 0; i < 60; i++) {
      const aborting = new AbortController();
      const response = await fetch(url, { signal: aborting.signal });
      expect(response.status).toBe(200);
      aborting.abort();
    }
    try {
      const last = await fetch(url, {
        headers: { range: 'bytes=0-99' },
        signal: AbortSignal.timeout(10_000),
      });
      expect(last.status).toBe(206);
      expect(Buffer.from(await last.arrayBuffer()).equals(long.subarray(0, 100))).toBe(true);
    } finally {
      // The client's kept-alive sockets would hold the app's close.
      ctx.app.server.closeAllConnections();
    }
  });

  it('stops an address past its hour’s bytes with a 429, and only that address', async () => {
    const author = await user();
    const moment = (await publish(author, mp4, 'video/mp4')).published.json();
    // A control plane with a budget of 1,500 bytes an address, over the same database and Redis.
    const limited = await startTestApp({ settings: { SVC_MEDIA_BYTES_PER_ADDRESS_HOUR: 1_500 } });
    try {
      const get = (remoteAddress: string) =>
        limited.app.inject({
          method: 'GET',
          url: pathOf(moment.video_url),
          headers: { range: 'bytes=0-999' },
          remoteAddress,
        });
      const viewer = uniqueAddress();
      expect((await get(viewer)).statusCode).toBe(206);
      // 1,000 bytes of 1,500 used: one more download may start.
      expect((await get(viewer)).statusCode).toBe(206);
      const refused = await get(viewer);
      expect(refused.statusCode).toBe(429);
      expect(refused.json().error.type).toBe('rate_limited');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(3_600);
      expect((await get(uniqueAddress())).statusCode).toBe(206);

      // Downloads at once count each other as they start (each reserves its bytes), and an IPv6
      // client is its /64 however it rotates: two of five get through, as one after another would.
      const network = `2001:db8:${randomInt(1, 0xffff).toString(16)}:${randomInt(1, 0xffff).toString(16)}`;
      const together = await Promise.all(
        Array.from({ length: 5 }, (_, n) => get(`${network}::${(n + 1).toString(16)}`)),
      );
      expect(together.map((response) => response.statusCode).sort()).toEqual([206, 206, 429, 429, 429]);
    } finally {
      await limited.close();
    }
  });

  it('counts the bytes served as bandwidth of the app that owns them', async () => {
    const author = await user();
    const moment = (await publish(author, mp4, 'video/mp4')).published.json();
    // What the media route counts, seen where it hands it to the accrual (whose flush is shared by
    // every test process on this Redis).
    const counted: { appId: string; product: string; quantity: number }[] = [];
    const { accrual } = ctx.container;
    const add = accrual.add;
    accrual.add = (payer, usage) => {
      counted.push({ appId: payer.appId, product: usage.product, quantity: usage.quantity });
      return add(payer, usage);
    };
    try {
      const part = await fetchMedia(moment.video_url, { range: 'bytes=0-999' });
      expect(part.statusCode).toBe(206);
      const thumbnail = await fetchMedia(moment.thumbnail_url);
      await new Promise((resolve) => setImmediate(resolve));
      expect(counted).toEqual([
        { appId, product: 'bandwidth', quantity: 1_000 },
        { appId, product: 'bandwidth', quantity: thumbnail.rawPayload.length },
      ]);
    } finally {
      accrual.add = add;
    }
  });
});

describe('thumbnails left over', () => {
  const HOUR = 3_600_000;
  const prefix = () => `media/live/${appId}/`;
  const scheduled = (thumbnailKey: string) =>
    ctx.container.pool.exists(
      sql.unsafe`select 1 from media_thumbnail_removals where thumbnail_key = ${thumbnailKey}`,
    );
  const sizeOf = (thumbnailKey: string) => ctx.container.objects.sizeOf(thumbnailKey);

  /** A draft of a moment's video, as a write prepares it before its transaction. */
  async function prepared(author: Awaited<ReturnType<typeof user>>) {
    const principal = { ...(await ctx.container.accounts.principalOfKey(keyId))!, userId: author.userId };
    const objectId = await upload(ctx.app, author.credential, webm, 'video/webm', 'clip');
    const draft = await ctx.container.media.prepare(
      principal,
      { objectId, ownerUserId: author.userId },
      MOMENT_VIDEO,
      { in: 'body', name: 'object_id' },
    );
    const record = () =>
      inTransaction(ctx.container.pool, (tx) => ctx.container.media.record(tx, principal, draft));
    return { objectId, draft, record };
  }

  it('of a write that never committed go once its hour is past; shown ones stay; recorded late, the write fails', async () => {
    const author = await user();
    const moment = (await publish(author, webm, 'video/webm')).published.json();
    // A write that stored its thumbnail and stopped before its commit: prepared, never recorded.
    const { draft, record } = await prepared(author);
    ctx.clock.advance(HOUR - 1);
    await ctx.container.media.sweepThumbnails(prefix());
    expect(await sizeOf(draft.thumbnailKey)).toBe(draft.thumbnailBytes);

    ctx.clock.advance(1);
    expect(await ctx.container.media.sweepThumbnails(prefix())).toBeGreaterThanOrEqual(1);
    expect(await sizeOf(draft.thumbnailKey)).toBeNull();
    expect(await scheduled(draft.thumbnailKey)).toBe(false);
    expect((await fetchMedia(moment.thumbnail_url)).statusCode).toBe(200);
    await expect(record()).rejects.toThrow(/swept/);
  });

  it('of a write whose transaction rolls back stay scheduled', async () => {
    const author = await user();
    const { objectId, draft, record } = await prepared(author);
    // The object gone before the write records its media: a 404, rolled back.
    expect((await callWithKey(ctx.app, key, 'DELETE', `/v1/storage/objects/${objectId}`)).statusCode).toBe(
      200,
    );
    await expect(record()).rejects.toMatchObject({ status: 404 });
    expect(await scheduled(draft.thumbnailKey)).toBe(true);
    ctx.clock.advance(HOUR);
    await ctx.container.media.sweepThumbnails(prefix());
    expect(await sizeOf(draft.thumbnailKey)).toBeNull();
  });

  it('of deleted media go with them; one whose removal failed goes at the sweep after a few minutes', async () => {
    const author = await user();
    const thumbnailKeyOf = (moment: { thumbnail_url: string }) =>
      `${prefix()}${/\/media\/(med_\w+)\//.exec(moment.thumbnail_url)![1]}.jpg`;
    const remove = async (moment: { id: string }) => {
      const deleted = await asUser(author.token, 'DELETE', `/v1/me/moments/${moment.id}`);
      expect(deleted.statusCode, deleted.body).toBe(200);
    };
    const gone = (await publish(author, mp4, 'video/mp4')).published.json();
    expect(await sizeOf(thumbnailKeyOf(gone))).toBeGreaterThan(0);
    await remove(gone);
    expect(await sizeOf(thumbnailKeyOf(gone))).toBeNull();
    expect(await scheduled(thumbnailKeyOf(gone))).toBe(false);

    // MinIO refuses the removal after the commit: the deletion stands, its thumbnail stays scheduled.
    const failing = (await publish(author, mp4, 'video/mp4')).published.json();
    const { objects } = ctx.container;
    const removeMany = objects.removeMany;
    objects.removeMany = async () => {
      throw new Error('MinIO refused the removal');
    };
    try {
      await remove(failing);
    } finally {
      objects.removeMany = removeMany;
    }
    expect((await fetchMedia(failing.thumbnail_url)).statusCode).toBe(404);
    expect(await sizeOf(thumbnailKeyOf(failing))).toBeGreaterThan(0);
    expect(await scheduled(thumbnailKeyOf(failing))).toBe(true);
    await ctx.container.media.sweepThumbnails(prefix());
    expect(await sizeOf(thumbnailKeyOf(failing))).toBeGreaterThan(0);
    ctx.clock.advance(5 * 60_000);
    await ctx.container.media.sweepThumbnails(prefix());
    expect(await sizeOf(thumbnailKeyOf(failing))).toBeNull();
    expect(await scheduled(thumbnailKeyOf(failing))).toBe(false);
  });
});

describe('listing, moderation, likes, comments and views', () => {
  it('lists newest first a page at a time, by author, and the app’s server deletes any', async () => {
    const author = await user();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.unshift((await publish(author, webm, 'video/webm')).published.json().id);
    const first = await callWithKey(ctx.app, key, 'GET', `/v1/moments?author=${author.username}&limit=2`);
    expect(first.statusCode).toBe(200);
    expect(first.headers['x-svc-cost-usd']).toBe(FREE);
    expect(first.json().items.map((m: { id: string }) => m.id)).toEqual(ids.slice(0, 2));
    const second = await callWithKey(
      ctx.app,
      key,
      'GET',
      `/v1/moments?author=${author.username}&limit=2&cursor=${first.json().next_cursor}`,
    );
    expect(second.json()).toEqual({ items: [expect.objectContaining({ id: ids[2] })], next_cursor: null });
    const nobody = await callWithKey(ctx.app, key, 'GET', `/v1/moments?author=nobody_${tag()}`);
    expect(nobody.json()).toEqual({ items: [], next_cursor: null });
    const all = await callWithKey(ctx.app, key, 'GET', '/v1/moments?limit=100');
    expect(all.json().items.map((m: { id: string }) => m.id)).toEqual(expect.arrayContaining(ids));

    const removed = await callWithKey(ctx.app, key, 'DELETE', `/v1/moments/${ids[0]}`);
    expect(removed.statusCode).toBe(200);
    expect(removed.headers['x-svc-cost-usd']).toBe(WRITE_COST);
    const after = await callWithKey(ctx.app, key, 'GET', `/v1/moments?author=${author.username}`);
    expect(after.json().items.map((m: { id: string }) => m.id)).toEqual(ids.slice(1));
    expect((await callWithKey(ctx.app, key, 'DELETE', `/v1/moments/${ids[0]}`)).statusCode).toBe(404);
  });

  it('likes once per user, comments, and counts a viewer once per day', async () => {
    const [author, fan] = [await user(), await user()];
    const moment = (await publish(author, webm, 'video/webm')).published.json();
    const like = () => asUser(fan.token, 'PUT', `/v1/me/moments/${moment.id}/like`);
    expect((await like()).json()).toEqual({ moment_id: moment.id, liked: true, like_count: 1 });
    expect((await like()).json()).toMatchObject({ like_count: 1 });
    const unlike = () => asUser(fan.token, 'DELETE', `/v1/me/moments/${moment.id}/like`);
    expect((await unlike()).json()).toEqual({ ok: true, id: moment.id });
    expect((await unlike()).statusCode).toBe(404);
    expect((await callWithKey(ctx.app, key, 'GET', `/v1/moments/${moment.id}`)).json().like_count).toBe(0);

    const comment = await asUser(fan.token, 'POST', `/v1/me/moments/${moment.id}/comments`, {
      text: 'Nice!',
    });
    expect(comment.statusCode, comment.body).toBe(200);
    const comments = await callWithKey(ctx.app, key, 'GET', `/v1/moments/${moment.id}/comments`);
    expect(comments.json().items).toEqual([
      { ...comment.json(), moment_id: moment.id, author_username: fan.username, text: 'Nice!' },
    ]);

    const view = (who: { token: string }) => asUser(who.token, 'POST', `/v1/me/moments/${moment.id}/views`);
    const first = await view(fan);
    expect(first.headers['x-svc-cost-usd']).toBe(FREE);
    expect(first.json()).toEqual({ moment_id: moment.id, counted: true, view_count: 1 });
    expect((await view(fan)).json()).toEqual({ moment_id: moment.id, counted: false, view_count: 1 });
    // A viewer needs no profile.
    expect((await view(await user(false))).json()).toMatchObject({ counted: true, view_count: 2 });
    ctx.clock.advance(86_400_000);
    expect((await view({ token: await tokenFor(fan.userId) })).json()).toMatchObject({
      counted: true,
      view_count: 3,
    });
    const read = await callWithKey(ctx.app, key, 'GET', `/v1/moments/${moment.id}`);
    expect(read.json()).toMatchObject({ like_count: 0, comment_count: 1, view_count: 3 });
    // Yesterday's views no longer matter, and are pruned.
    const { pruned } = await ctx.container.moments.pruneViews();
    expect(pruned).toBeGreaterThanOrEqual(2);
  });

  it('emits sip.created with the moment', async () => {
    await ctx.container.webhooks.create(
      { appId, mode: 'live' },
      { url: 'https://hooks.example.com/sips', event_types: ['sip.created'] },
    );
    const author = await user();
    const moment = (await publish(author, webm, 'video/webm')).published.json();
    const body = await ctx.container.pool.oneFirst(sql.type(z.object({ body: z.string() }))`
      select body from webhook_events where app_id = ${appId} and type = 'sip.created'
        and body::jsonb->'data'->'moment'->>'id' = ${moment.id}`);
    expect(JSON.parse(body).data).toEqual({ moment });
  });
});

describe('the sandbox', () => {
  it('gives a test key moments with real videos and thumbnails, their counts what their rows count', async () => {
    const sandbox = await createCustomer(ctx.container);
    const first = await callWithKey(ctx.app, sandbox.token, 'GET', '/v1/moments?limit=100');
    expect(first.statusCode, first.body).toBe(200);
    const moments = first.json().items;
    expect(moments).toHaveLength(SANDBOX_MOMENTS);
    for (const moment of moments) expect(moment.author_id).toMatch(/^sandbox-/);
    for (const moment of moments.slice(0, SANDBOX_CLIPS.length)) {
      const played = await fetchMedia(moment.video_url, { range: 'bytes=0-' });
      expect(played.statusCode).toBe(206);
      expect(played.headers['content-type']).toMatch(/^video\/(mp4|webm)$/);
      const thumbnail = await probeBytes((await fetchMedia(moment.thumbnail_url)).rawPayload);
      expect(thumbnail.codec_name).toBe('mjpeg');
      expect(Math.max(thumbnail.width, thumbnail.height)).toBe(Math.max(moment.width, moment.height));
    }
    const mismatched = await ctx.container.pool.anyFirst(sql.type(z.object({ id: z.string() }))`
      select mo.id from moments mo
      where mo.app_id = ${sandbox.app.id}
        and (mo.like_count <> (select count(*) from moment_likes l where l.moment_pk = mo.pk)
          or mo.comment_count <> (select count(*) from moment_comments c where c.moment_pk = mo.pk))`);
    expect(mismatched).toEqual([]);
    const liked = moments.filter((moment: { like_count: number }) => moment.like_count > 0);
    expect(liked.length).toBeGreaterThan(SANDBOX_MOMENTS / 2);
    // Moments share clips, not media: deleting one leaves every other showing.
    const removed = await callWithKey(ctx.app, sandbox.token, 'DELETE', `/v1/moments/${moments[0].id}`);
    expect(removed.statusCode, removed.body).toBe(200);
    const after = (await callWithKey(ctx.app, sandbox.token, 'GET', '/v1/moments?limit=100')).json().items;
    expect(after.map((moment: { id: string }) => moment.id)).toEqual(
      moments.slice(1).map((moment: { id: string }) => moment.id),
    );
    expect((await fetchMedia(moments[1].thumbnail_url)).statusCode).toBe(200);
  });
});

describe('a test object’s expiry', () => {
  it('deletes the moments and studio assets made from it, not only their media', async () => {
    const testApp = await createCustomer(ctx.container);
    const listed = async (url: string) =>
      ((await callWithKey(ctx.app, testApp.token, 'GET', url)).json().items as { id: string }[]).map(
        (item) => item.id,
      );
    const author = await user(true, testApp.token);
    const moments = [
      (await publish(author, webm, 'video/webm')).published.json().id as string,
      (await publish(author, mp4, 'video/mp4')).published.json().id as string,
    ];
    const photoId = await upload(
      ctx.app,
      { kind: 'key', token: testApp.token },
      await photo('320x240'),
      'image/png',
    );
    const created = await callWithKey(ctx.app, testApp.token, 'POST', '/v1/studio', {
      kind: 'photo',
      url: photoId,
    });
    expect(created.statusCode, created.body).toBe(201);
    const asset = created.json().id as string;
    const momentsBefore = await listed('/v1/moments?limit=100');
    const assetsBefore = await listed('/v1/studio?limit=100');
    expect(momentsBefore.slice(0, 2)).toEqual([...moments].reverse());
    expect(assetsBefore[0]).toBe(asset);

    ctx.clock.advance(TEST_OBJECT_DAYS * 86_400_000 + 1);
    await ctx.container.storage.sweep();
    // Their own rows deleted, the listing indexes (of undeleted rows) drop them; reads hid them before.
    const deletedAt = await ctx.container.pool.anyFirst(sql.type(
      z.object({ deleted_at: z.date().nullable() }),
    )`
      select deleted_at from moments where id = any(${sql.array(moments, 'text')})
      union all select deleted_at from studio_assets where id = ${asset}`);
    expect(deletedAt).toEqual([ctx.clock.now(), ctx.clock.now(), ctx.clock.now()]);
    expect(await listed('/v1/moments?limit=100')).toEqual(momentsBefore.slice(2));
    expect(await listed('/v1/studio?limit=100')).toEqual(assetsBefore.slice(1));
  });
});
