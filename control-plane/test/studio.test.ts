/**
 * Studio assets against the real PostgreSQL, MinIO, ffprobe and ffmpeg: photos and videos from real
 * files the app uploads (size read from the file, a thumbnail that decodes, media URLs that stop with
 * the asset), https URLs kept as given, what is refused, paging, PATCH, DELETE, the isolation of apps
 * and key modes, the test mode's sandbox and the price of each call.
 */
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { TEST_OBJECT_DAYS } from '../src/modules/storage/schema.js';
import { storageKeyOf } from '../src/modules/storage/service.js';
import { STUDIO_URL_FIXTURES } from '../src/modules/studio/sandbox.js';
import { MAX_TAGS, MAX_URL_LENGTH } from '../src/modules/studio/schema.js';
import { photo, probeBytes, upload, video } from './media-files.js';
import { callWithKey, createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

/** `writes.calls` at its default price, as the cost header writes it. */
const WRITE_COST = '0.000500';
const FREE = '0.000000';
const FUNDS = 10_000_000;

let ctx: TestContext;
let png: Buffer;
let mp4: Buffer;

beforeAll(async () => {
  ctx = await startTestApp();
  await ctx.container.objects.ensureBucket({ testPrefix: 'test/', testObjectDays: TEST_OBJECT_DAYS });
  [png, mp4] = await Promise.all([photo('800x600'), video('mp4', '320x240', 2)]);
});
afterAll(async () => {
  await ctx.close();
});

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';
type Reply = Awaited<ReturnType<typeof callWithKey>>;

interface Asset {
  id: string;
  kind: 'photo' | 'video';
  url: string;
  thumbnail_url: string | null;
  title: string;
  width: number | null;
  height: number | null;
  tags: string[];
  created_at: string;
  updated_at: string;
}

interface Page {
  items: Asset[];
  next_cursor: string | null;
}

/** A live app with funds: its key, and calls with it. */
async function liveApp() {
  const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: FUNDS });
  const call = (method: Method, url: string, payload?: object) =>
    callWithKey(ctx.app, customer.token, method, url, payload);
  return { ...customer, call, credential: { kind: 'key' as const, token: customer.token } };
}
type LiveApp = Awaited<ReturnType<typeof liveApp>>;

/** Creates an asset a moment after the previous one (the clock is the test's): 201 expected. */
async function create(app: LiveApp, body: object): Promise<Asset> {
  ctx.clock.advance(1_000);
  const created = await app.call('POST', '/v1/studio', body);
  expect(created.statusCode, created.body).toBe(201);
  expect(created.headers['x-svc-cost-usd']).toBe(WRITE_COST);
  return created.json();
}

/** A keyless request through the app, as `<img src>` makes it. */
const fetchMedia = (url: string) => ctx.app.inject({ method: 'GET', url: new URL(url).pathname });

/** A 422 that names exactly these body fields, each with a message saying why, free of charge. */
function expectRefused(reply: Reply, fields: Record<string, RegExp>) {
  expect(reply.statusCode, reply.body).toBe(422);
  expect(reply.headers['x-svc-cost-usd']).toBe(FREE);
  const named = reply.json().error.fields as { in: string; field: string; message: string }[];
  // A union's failure (a kind, an optional title) lists each branch's message under the one field.
  expect([...new Set(named.map((field) => field.field))].sort()).toEqual(Object.keys(fields).sort());
  expect(named.every((field) => field.in === 'body')).toBe(true);
  for (const [field, why] of Object.entries(fields)) {
    const messages = named.filter((named) => named.field === field).map((named) => named.message);
    expect(
      messages.some((message) => why.test(message)),
      messages.join('; '),
    ).toBe(true);
  }
}

const URL_PHOTO = {
  kind: 'photo',
  url: 'https://cdn.example.org/gallery/Beach%20Day.JPG?v=2#top',
  thumbnail_url: 'https://cdn.example.org/gallery/beach-small.jpg',
  title: 'Beach day',
  width: 1200,
  height: 800,
  tags: ['summer', 'beach'],
};

describe('an asset from a storage object', () => {
  it('is a photo whose size is read from the file, with a JPEG thumbnail, and costs one write', async () => {
    const app = await liveApp();
    const objectId = await upload(ctx.app, app.credential, png, 'image/png', 'photo.png');
    const asset = await create(app, { kind: 'photo', url: objectId, title: 'Test card', tags: ['a', 'b'] });
    expect(asset).toEqual({
      id: expect.stringMatching(/^sta_\w+$/),
      kind: 'photo',
      url: expect.stringMatching(/\/media\/med_\w+$/),
      thumbnail_url: expect.stringMatching(/\/media\/med_\w+\/thumbnail$/),
      title: 'Test card',
      width: 800,
      height: 600,
      tags: ['a', 'b'],
      created_at: expect.any(String),
      updated_at: asset.created_at,
    });
    expect(asset.thumbnail_url).toBe(`${asset.url}/thumbnail`);

    const thumbnail = await fetchMedia(asset.thumbnail_url!);
    expect(thumbnail.statusCode).toBe(200);
    expect(thumbnail.headers['content-type']).toBe('image/jpeg');
    expect([...thumbnail.rawPayload.subarray(0, 2)]).toEqual([0xff, 0xd8]);
    expect(await probeBytes(thumbnail.rawPayload)).toEqual({ codec_name: 'mjpeg', width: 640, height: 480 });
    const file = await fetchMedia(asset.url);
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toBe('image/png');
    expect(file.rawPayload.equals(png)).toBe(true);

    const read = await app.call('GET', `/v1/studio/${asset.id}`);
    expect(read.statusCode).toBe(200);
    expect(read.headers['x-svc-cost-usd']).toBe(FREE);
    expect(read.json()).toEqual(asset);
  });

  it('is a video whose size is read from the file, with a thumbnail of a frame', async () => {
    const app = await liveApp();
    const objectId = await upload(ctx.app, app.credential, mp4, 'video/mp4', 'clip.mp4');
    const asset = await create(app, { kind: 'video', url: objectId });
    expect(asset).toMatchObject({ kind: 'video', title: '', tags: [], width: 320, height: 240 });
    const thumbnail = await fetchMedia(asset.thumbnail_url!);
    expect(thumbnail.headers['content-type']).toBe('image/jpeg');
    expect(await probeBytes(thumbnail.rawPayload)).toEqual({ codec_name: 'mjpeg', width: 320, height: 240 });
    const range = await ctx.app.inject({
      method: 'GET',
      url: new URL(asset.url).pathname,
      headers: { range: 'bytes=0-99' },
    });
    expect(range.statusCode).toBe(206);
    expect(range.headers['content-type']).toBe('video/mp4');
    expect(range.rawPayload.equals(mp4.subarray(0, 100))).toBe(true);
  });

  it('refuses a file that is not of its kind, naming url, and charges nothing', async () => {
    const app = await liveApp();
    const text = await upload(ctx.app, app.credential, 'not a picture at all', 'image/png', 'fake.png');
    expectRefused(await app.call('POST', '/v1/studio', { kind: 'photo', url: text }), {
      url: /is not a photo/,
    });
    const clip = await upload(ctx.app, app.credential, mp4, 'video/mp4', 'clip.mp4');
    expectRefused(await app.call('POST', '/v1/studio', { kind: 'photo', url: clip }), {
      url: /is not a photo/,
    });
    const picture = await upload(ctx.app, app.credential, png, 'image/png', 'photo.png');
    expectRefused(await app.call('POST', '/v1/studio', { kind: 'video', url: picture }), {
      url: /is not a video/,
    });
    const list = await app.call('GET', '/v1/studio');
    expect(list.json()).toEqual({ items: [], next_cursor: null });
  });

  it('refuses a size or thumbnail sent with an object id: the file says them', async () => {
    const app = await liveApp();
    const objectId = await upload(ctx.app, app.credential, png, 'image/png', 'photo.png');
    expectRefused(await app.call('POST', '/v1/studio', { kind: 'photo', url: objectId, width: 800 }), {
      width: /is read from the file/,
    });
    expectRefused(
      await app.call('POST', '/v1/studio', {
        kind: 'photo',
        url: objectId,
        height: 600,
        thumbnail_url: 'https://cdn.example.org/t.jpg',
      }),
      { height: /is read from the file/, thumbnail_url: /is made from the file/ },
    );
  });

  it('answers 404 for an object the app does not have, and 409 for a pending one', async () => {
    const app = await liveApp();
    const missing = await app.call('POST', '/v1/studio', { kind: 'photo', url: 'obj_doesNotExist123' });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers['x-svc-cost-usd']).toBe(FREE);

    const other = await liveApp();
    const theirs = await upload(ctx.app, other.credential, png, 'image/png', 'photo.png');
    expect((await app.call('POST', '/v1/studio', { kind: 'photo', url: theirs })).statusCode).toBe(404);

    const reserved = await app.call('POST', '/v1/storage/uploads', {
      name: 'later.png',
      content_type: 'image/png',
      size_bytes: png.length,
    });
    const pending = await app.call('POST', '/v1/studio', { kind: 'photo', url: reserved.json().object.id });
    expect(pending.statusCode).toBe(409);
  });

  it('is deleted with its media when storage forgets the object (an expiry)', async () => {
    const app = await liveApp();
    const objectId = await upload(ctx.app, app.credential, png, 'image/png', 'photo.png');
    const asset = await create(app, { kind: 'photo', url: objectId });
    await ctx.container.storage.forgetRemovedKey(storageKeyOf('live', app.app.id, objectId));
    // Its own row, not only its media: the listing indexes hold undeleted assets only.
    const deletedAt = await ctx.container.pool.oneFirst(
      sql.type(z.object({ deleted_at: z.date().nullable() }))`
        select deleted_at from studio_assets where id = ${asset.id}`,
    );
    expect(deletedAt).toEqual(ctx.clock.now());
    expect((await app.call('GET', `/v1/studio/${asset.id}`)).statusCode).toBe(404);
    expect((await app.call('GET', '/v1/studio')).json().items).toEqual([]);
    expect((await app.call('PATCH', `/v1/studio/${asset.id}`, { title: 'x' })).statusCode).toBe(404);
    expect((await app.call('DELETE', `/v1/studio/${asset.id}`)).statusCode).toBe(404);
    expect((await fetchMedia(asset.url)).statusCode).toBe(404);
  });

  it('replays a create sent again with its Idempotency-Key, without a second asset', async () => {
    const app = await liveApp();
    const objectId = await upload(ctx.app, app.credential, png, 'image/png', 'photo.png');
    const send = () =>
      ctx.app.inject({
        method: 'POST',
        url: '/v1/studio',
        headers: { authorization: `Bearer ${app.token}`, 'idempotency-key': 'studio-once' },
        remoteAddress: uniqueAddress(),
        payload: { kind: 'photo', url: objectId },
      });
    const first = await send();
    expect(first.statusCode, first.body).toBe(201);
    const again = await send();
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toEqual(first.json());
    expect((await app.call('GET', '/v1/studio')).json().items).toHaveLength(1);
  });
});

describe('an asset at an https URL', () => {
  it('is kept as given, with the size and thumbnail the app declares', async () => {
    const app = await liveApp();
    const asset = await create(app, URL_PHOTO);
    const { kind, url, thumbnail_url, title, width, height, tags } = URL_PHOTO;
    expect(asset).toEqual({
      id: expect.stringMatching(/^sta_/),
      ...{ kind, url, thumbnail_url, title, width, height, tags },
      created_at: ctx.clock.now().toISOString(),
      updated_at: ctx.clock.now().toISOString(),
    });
    expect((await app.call('GET', `/v1/studio/${asset.id}`)).json()).toEqual(asset);

    const bare = await create(app, { kind: 'video', url: 'https://videos.example.org/a.mp4' });
    expect(bare).toMatchObject({ thumbnail_url: null, width: null, height: null, title: '', tags: [] });
  });

  it.each([
    ['http', { url: 'http://cdn.example.org/a.jpg' }, { url: /https:\/\/ URL or the id .*http: is refused/ }],
    ['javascript:', { url: 'javascript:alert(1)' }, { url: /javascript: is refused/ }],
    ['data:', { url: 'data:image/png;base64,iVBORw0KGgo=' }, { url: /data: is refused/ }],
    ['not a URL', { url: 'cdn.example.org/a.jpg' }, { url: /not a URL/ }],
    ['credentials', { url: 'https://me:secret@cdn.example.org/a.jpg' }, { url: /credentials/ }],
    ['no host', { url: 'https:///a.jpg' }, { url: /host/ }],
    ['a space', { url: 'https://cdn.example.org/a b.jpg' }, { url: /spaces/ }],
    ['too long', { url: `https://cdn.example.org/${'a'.repeat(MAX_URL_LENGTH)}` }, { url: /2048/ }],
    ['an http thumbnail', { thumbnail_url: 'http://cdn.example.org/t.jpg' }, { thumbnail_url: /http:/ }],
    ['no kind', { kind: undefined }, { kind: /required/ }],
    ['another kind', { kind: 'audio' }, { kind: /anyOf/ }],
    ['a width of 0', { width: 0 }, { width: />= 1/ }],
    ['a height over 100000', { height: 100_001 }, { height: /<= 100000/ }],
    ['a title on two lines', { title: 'one\ntwo' }, { title: /must not hold control/ }],
    ['a title of 201 characters', { title: 'x'.repeat(201) }, { title: /more than 200/ }],
    ['too many tags', { tags: Array.from({ length: MAX_TAGS + 1 }, (_, i) => `t${i}`) }, { tags: /20/ }],
    ['a repeated tag', { tags: ['a', 'a'] }, { tags: /duplicate/ }],
    ['an empty tag', { tags: [''] }, { 'tags.0': /fewer than 1/ }],
    ['a tag of 51 characters', { tags: ['t'.repeat(51)] }, { 'tags.0': /50/ }],
  ])('refuses %s, naming the field, free of charge', async (_, change, fields) => {
    const app = await liveApp();
    expectRefused(await app.call('POST', '/v1/studio', { ...URL_PHOTO, ...change }), fields);
  });
});

describe('the list', () => {
  it('pages newest first, of one kind or both, with cursors, free of charge', async () => {
    const app = await liveApp();
    const made: Asset[] = [];
    for (const kind of ['photo', 'video', 'photo', 'photo', 'video'] as const)
      made.push(await create(app, { kind, url: `https://cdn.example.org/${made.length}` }));
    const newestFirst = [...made].reverse();

    const walk = async (query: string, limit: number) => {
      const ids: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const reply = await app.call(
          'GET',
          `/v1/studio?limit=${limit}${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        expect(reply.statusCode, reply.body).toBe(200);
        expect(reply.headers['x-svc-cost-usd']).toBe(FREE);
        const page: Page = reply.json();
        expect(page.items.length).toBeLessThanOrEqual(limit);
        ids.push(...page.items.map((item) => item.id));
        cursor = page.next_cursor;
        pages += 1;
      } while (cursor !== null);
      return { ids, pages };
    };
    expect(await walk('', 2)).toEqual({ ids: newestFirst.map((asset) => asset.id), pages: 3 });
    const videos = newestFirst.filter((asset) => asset.kind === 'video').map((asset) => asset.id);
    expect(await walk('&kind=video', 1)).toEqual({ ids: videos, pages: 2 });
    const photos = newestFirst.filter((asset) => asset.kind === 'photo').map((asset) => asset.id);
    expect(await walk('&kind=photo', 2)).toEqual({ ids: photos, pages: 2 });

    const all = await app.call('GET', '/v1/studio');
    expect(all.json()).toEqual({ items: newestFirst, next_cursor: null });
  });

  it('refuses a cursor it did not give out, a kind it does not know and a limit outside 1-100', async () => {
    const app = await liveApp();
    for (const query of ['cursor=abc.def', 'kind=audio', 'limit=0', 'limit=101']) {
      const reply = await app.call('GET', `/v1/studio?${query}`);
      expect(reply.statusCode, query).toBe(422);
      expect(reply.json().error.fields[0]).toMatchObject({ in: 'query', field: query.split('=')[0] });
    }
  });
});

describe('PATCH', () => {
  it('changes a URL asset’s title, tags, thumbnail and size, and null takes one back', async () => {
    const app = await liveApp();
    const asset = await create(app, URL_PHOTO);
    ctx.clock.advance(60_000);
    const patched = await app.call('PATCH', `/v1/studio/${asset.id}`, {
      title: 'Beach day, edited',
      tags: ['edited'],
      thumbnail_url: 'https://cdn.example.org/new-thumb.jpg',
      width: 600,
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.headers['x-svc-cost-usd']).toBe(WRITE_COST);
    expect(patched.json()).toEqual({
      ...asset,
      title: 'Beach day, edited',
      tags: ['edited'],
      thumbnail_url: 'https://cdn.example.org/new-thumb.jpg',
      width: 600,
      updated_at: ctx.clock.now().toISOString(),
    });
    const cleared = await app.call('PATCH', `/v1/studio/${asset.id}`, {
      title: '',
      tags: [],
      thumbnail_url: null,
      width: null,
      height: null,
    });
    expect(cleared.json()).toMatchObject({
      title: '',
      tags: [],
      thumbnail_url: null,
      width: null,
      height: null,
    });
    expect((await app.call('GET', `/v1/studio/${asset.id}`)).json()).toEqual(cleared.json());
  });

  it('changes an object asset’s title and tags, never what its file says', async () => {
    const app = await liveApp();
    const objectId = await upload(ctx.app, app.credential, png, 'image/png', 'photo.png');
    const asset = await create(app, { kind: 'photo', url: objectId });
    const patched = await app.call('PATCH', `/v1/studio/${asset.id}`, { title: 'Renamed', tags: ['x'] });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({
      ...asset,
      title: 'Renamed',
      tags: ['x'],
      updated_at: expect.any(String),
    });
    expectRefused(await app.call('PATCH', `/v1/studio/${asset.id}`, { title: 'no', width: 10 }), {
      width: /is read from the file/,
    });
    expectRefused(await app.call('PATCH', `/v1/studio/${asset.id}`, { thumbnail_url: null }), {
      thumbnail_url: /is made from the file/,
    });
    expect((await app.call('GET', `/v1/studio/${asset.id}`)).json().title).toBe('Renamed');
  });

  it('refuses an empty change, an http thumbnail and the url; answers 404 for no such asset', async () => {
    const app = await liveApp();
    const asset = await create(app, URL_PHOTO);
    const patch = (body: object, id = asset.id) => app.call('PATCH', `/v1/studio/${id}`, body);
    expect((await patch({})).statusCode).toBe(422);
    expectRefused(await patch({ thumbnail_url: 'http://cdn.example.org/t.jpg' }), { thumbnail_url: /http:/ });
    expectRefused(await patch({ url: 'https://cdn.example.org/other.jpg' }), { url: /not a known field/ });
    const missing = await patch({ title: 'x' }, 'sta_missing');
    expect(missing.statusCode).toBe(404);
    expect(missing.headers['x-svc-cost-usd']).toBe(FREE);
  });
});

describe('DELETE', () => {
  it('stops an object asset’s media URLs; the object, in use until then, can then be removed', async () => {
    const app = await liveApp();
    const objectId = await upload(ctx.app, app.credential, png, 'image/png', 'photo.png');
    const asset = await create(app, { kind: 'photo', url: objectId });
    const inUse = await app.call('DELETE', `/v1/storage/objects/${objectId}`);
    expect(inUse.statusCode).toBe(409);
    expect(inUse.json().error.code).toBe('OBJECT_IN_USE');

    const deleted = await app.call('DELETE', `/v1/studio/${asset.id}`);
    expect(deleted.statusCode, deleted.body).toBe(200);
    expect(deleted.headers['x-svc-cost-usd']).toBe(WRITE_COST);
    expect(deleted.json()).toEqual({ ok: true, id: asset.id });
    expect((await fetchMedia(asset.url)).statusCode).toBe(404);
    expect((await fetchMedia(asset.thumbnail_url!)).statusCode).toBe(404);
    expect((await app.call('GET', `/v1/studio/${asset.id}`)).statusCode).toBe(404);
    expect((await app.call('GET', '/v1/studio')).json().items).toEqual([]);
    const again = await app.call('DELETE', `/v1/studio/${asset.id}`);
    expect(again.statusCode).toBe(404);
    expect(again.headers['x-svc-cost-usd']).toBe(FREE);

    const removed = await app.call('DELETE', `/v1/storage/objects/${objectId}`);
    expect(removed.statusCode, removed.body).toBe(200);
  });

  it('removes a URL asset from the list', async () => {
    const app = await liveApp();
    const kept = await create(app, URL_PHOTO);
    const gone = await create(app, { ...URL_PHOTO, title: 'gone' });
    expect((await app.call('DELETE', `/v1/studio/${gone.id}`)).json()).toEqual({ ok: true, id: gone.id });
    expect((await app.call('GET', '/v1/studio')).json().items).toEqual([kept]);
  });
});

describe('who sees what', () => {
  it('answers 404 for another app’s asset, and lists only the caller’s', async () => {
    const owner = await liveApp();
    const stranger = await liveApp();
    const asset = await create(owner, URL_PHOTO);
    expect((await stranger.call('GET', `/v1/studio/${asset.id}`)).statusCode).toBe(404);
    expect((await stranger.call('PATCH', `/v1/studio/${asset.id}`, { title: 'mine' })).statusCode).toBe(404);
    expect((await stranger.call('DELETE', `/v1/studio/${asset.id}`)).statusCode).toBe(404);
    expect((await stranger.call('GET', '/v1/studio')).json().items).toEqual([]);
    expect((await owner.call('GET', `/v1/studio/${asset.id}`)).json()).toEqual(asset);
  });

  it('gives a test key the sandbox’s assets, apart from the live mode’s', async () => {
    const app = await liveApp();
    await create(app, URL_PHOTO);
    const { token } = await ctx.container.accounts.createKey({
      appId: app.app.id,
      kind: 'secret',
      mode: 'test',
    });
    const asTest = (method: Method, url: string, payload?: object) =>
      callWithKey(ctx.app, token, method, url, payload);

    const page = await asTest('GET', '/v1/studio?limit=100');
    expect(page.statusCode, page.body).toBe(200);
    const items: Asset[] = page.json().items;
    // Videos of the sandbox's clips, served like an app's own uploads, and URL assets.
    const clips = items.filter((item) => new URL(item.url).pathname.startsWith('/media/'));
    expect(clips.map(({ title, width, height }) => ({ title, width, height }))).toEqual(
      expect.arrayContaining([
        { title: 'Fractal zoom', width: 360, height: 640 },
        { title: 'Colour bars', width: 640, height: 360 },
      ]),
    );
    expect(clips).toHaveLength(2);
    for (const clip of clips) {
      const thumbnail = await ctx.app.inject({ method: 'GET', url: new URL(clip.thumbnail_url!).pathname });
      expect(thumbnail.statusCode).toBe(200);
      expect(thumbnail.headers['content-type']).toBe('image/jpeg');
    }
    const urlAssets = items.filter((item) => !clips.includes(item));
    expect(urlAssets.map((item) => item.title)).toEqual(STUDIO_URL_FIXTURES.map(([, , title]) => title));
    expect(urlAssets.every((item) => /^sta_sbx_[0-9a-f]{20}_\d{3}$/.test(item.id))).toBe(true);
    expect(new Set(items.map((item) => item.kind))).toEqual(new Set(['photo', 'video']));
    expect(urlAssets[0]).toMatchObject({
      kind: 'photo',
      url: 'https://images.example.com/sandbox/studio/harbour-golden-hour.jpg',
      thumbnail_url: 'https://images.example.com/sandbox/studio/harbour-golden-hour-small.jpg',
      width: 4032,
      height: 3024,
      tags: ['travel', 'sunset'],
    });
    expect(items.some((item) => item.width === null && item.thumbnail_url === null)).toBe(true);
    const videos = (await asTest('GET', '/v1/studio?kind=video&limit=100')).json().items as Asset[];
    expect(videos.map((item) => item.id)).toEqual(
      items.filter((item) => item.kind === 'video').map((i) => i.id),
    );

    // The sandbox is the test mode's own: its assets are the app's to change.
    const first = urlAssets[0]!;
    const patched = await asTest('PATCH', `/v1/studio/${first.id}`, { title: 'Mine now' });
    expect(patched.statusCode).toBe(200);
    expect(patched.headers['x-svc-cost-usd']).toBe(WRITE_COST);
    expect((await asTest('DELETE', `/v1/studio/${first.id}`)).statusCode).toBe(200);
    expect((await asTest('GET', '/v1/studio?limit=100')).json().items).toHaveLength(items.length - 1);
    // The live key sees its own asset only, never the sandbox's.
    expect((await app.call('GET', `/v1/studio/${first.id}`)).statusCode).toBe(404);
    expect((await app.call('GET', '/v1/studio')).json().items).toHaveLength(1);
  });
});
