/**
 * About content against the real PostgreSQL and Redis: a profile owner's sections, services, catalog
 * items and FAQ entries (user tokens), the lists the app's server reads (secret key), their pages,
 * limits, prices and concurrency, and the test mode's sandbox.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ABOUT_FIXTURES } from '../src/modules/about/sandbox.js';
import { formatUsd } from '../src/platform/money.js';
import { requireMetric } from '../src/platform/prices.js';
import { callWithKey, createCustomer, startTestApp, type TestContext } from './support.js';

/** What every About write costs (`writes.calls` at its default price), as the cost header writes it. */
const WRITE_MICROS = requireMetric('writes', 'calls').defaultPriceMicros;
const WRITE_COST = formatUsd(WRITE_MICROS);
const FREE = formatUsd(0);

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

type Method = Parameters<typeof callWithKey>[2];
type Reply = Awaited<ReturnType<typeof callWithKey>>;
type Kind = 'services' | 'catalog' | 'faqs';
type Item = { id: string } & Record<string, unknown>;

interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

interface Section {
  id: string;
  kind: Kind;
  position: number;
  status: 'published' | 'draft';
}

interface Member {
  userId: string;
  username: string;
  token: string;
}

/** Eight hex characters: the names of one test never meet another's, nor the sandbox's. */
const tag = () => randomBytes(4).toString('hex');
const idsOf = (page: Page<{ id: string }>) => page.items.map((item) => item.id);
/** A section where a list shows it. */
const at = (section: Section, position: number) => ({ ...section, position });
/** A list's one and only page. */
const whole = <T>(items: T[]) => ({ items, next_cursor: null });
const EMPTY = whole([]);

/** A call as the app's user: a user token is a bearer token as a key is. */
const asUser = (token: string, method: Method, url: string, payload?: object) =>
  callWithKey(ctx.app, token, method, url, payload);

/** A read of the app's server, with its secret key. */
const read = (key: string, url: string) => callWithKey(ctx.app, key, 'GET', url);

/** A user token the app's server mints for its user. */
const mintToken = async (key: string, userId: string) =>
  (await ok<{ token: string }>(asUser(key, 'POST', `/v1/users/${encodeURIComponent(userId)}/tokens`, {})))
    .token;

/** A user of the app with a token and a profile. */
async function member(key: string): Promise<Member> {
  const userId = `user-${tag()}`;
  const username = `about_${tag()}`;
  const token = await mintToken(key, userId);
  await ok(asUser(token, 'PUT', '/v1/me/profile', { username }));
  return { userId, username, token };
}

/** A live app with ten dollars (no sandbox to seed: every row is the test's own). */
const liveApp = async () => createCustomer(ctx.container, { mode: 'live', balanceMicros: 10_000_000 });

/**
 * A refusal: its status, and what it names: its code, or the one field (`body price_amount`) that
 * every field error of a 422 names.
 */
function expectRefusal(reply: Reply, status: number, names: { code?: string; field?: string } = {}) {
  expect(reply.statusCode, reply.body).toBe(status);
  const { error } = reply.json();
  if (names.code !== undefined) expect(error.code).toBe(names.code);
  if (names.field !== undefined) {
    expect(error.type).toBe('invalid_request');
    const fields = error.fields.map((f: { in: string; field: string }) => `${f.in} ${f.field}`);
    expect([...new Set(fields)]).toEqual([names.field]);
  }
}

/** The body of a call that must succeed. */
async function ok<T>(reply: Promise<Reply>): Promise<T> {
  const done = await reply;
  expect(done.statusCode, done.body).toBe(200);
  return done.json<T>();
}

const create = (owner: Member, kind: Kind, body: object) =>
  ok<Item>(asUser(owner.token, 'POST', `/v1/me/about/${kind}`, body));
const addSection = (owner: Member, kind: Kind, status?: 'published' | 'draft') =>
  ok<Section>(asUser(owner.token, 'POST', '/v1/me/about/sections', { kind, ...(status ? { status } : {}) }));
const setStatus = (owner: Member, id: string, status: 'published' | 'draft') =>
  ok<Section>(asUser(owner.token, 'PATCH', `/v1/me/about/sections/${id}`, { status }));
const visitorList = <T = Item>(key: string, owner: Member, list: Kind | 'sections', query = '') =>
  ok<Page<T>>(read(key, `/v1/profiles/${owner.username}/${list}${query}`));
const ownerList = <T = Item>(owner: Member, list: Kind | 'sections', query = '') =>
  ok<Page<T>>(asUser(owner.token, 'GET', `/v1/me/about/${list}${query}`));

/** The stored (position, id) of an owner's sections or items of a kind, by position. */
async function stored(owner: Member, list: Kind | 'sections') {
  return ctx.container.pool.any(sql.type(z.object({ position: z.number(), id: z.string() }))`
    select t.position, t.id
    from ${list === 'sections' ? sql.fragment`about_sections t` : sql.fragment`about_items t`}
    join profiles p on p.pk = t.profile_pk
    where p.user_id = ${owner.userId} ${list === 'sections' ? sql.fragment`` : sql.fragment`and t.kind = ${list}`}
    order by t.position`);
}
const positions = async (owner: Member, list: Kind | 'sections') =>
  (await stored(owner, list)).map((row) => row.position);
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Each kind: a create with every field, one with the required ones only, and what it defaults. */
const KINDS = {
  services: {
    prefix: 'srv',
    full: { name: 'Haircut', duration: '45 min', category: 'Hair', accepts_bookings: true },
    required: { name: 'Beard trim' },
    defaults: { duration: '', category: '', accepts_bookings: false },
    change: { duration: '1 h', accepts_bookings: false },
  },
  catalog: {
    prefix: 'cat',
    full: {
      name: 'Sourdough',
      department: 'Bread',
      price_amount: '12.5',
      price_currency: 'usd',
      in_stock: false,
      images: ['https://cdn.example.com/a.jpg', 'https://cdn.example.com/b.jpg?size=2'],
    },
    required: { name: 'Sticker', price_amount: '0', price_currency: 'coin' },
    defaults: { department: '', in_stock: true, images: [] },
    change: { price_amount: '13.75', images: [] },
  },
  faqs: {
    prefix: 'faq',
    full: { question: 'Do you open on Sundays?', answer: 'Yes,\nfrom 9 to 2.', category: 'Hours' },
    required: { question: 'Where are you?', answer: 'On the corner.' },
    defaults: { category: '' },
    change: { answer: 'Only in summer.', category: '' },
  },
} as const;
const KIND_NAMES = Object.keys(KINDS) as Kind[];

describe.each(KIND_NAMES)('%s', (kind) => {
  const described = KINDS[kind];

  it('are created with the spec’s fields, changed, reordered and deleted by their owner', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);

    const full = await create(owner, kind, described.full);
    expect(full).toEqual({
      id: expect.stringMatching(new RegExp(`^${described.prefix}_`)),
      ...described.full,
    });
    const required = await create(owner, kind, described.required);
    expect(required).toEqual({ id: expect.any(String), ...described.required, ...described.defaults });
    const third = await create(owner, kind, described.required);
    expect(idsOf(await ownerList(owner, kind))).toEqual([full.id, required.id, third.id]);
    expect(await positions(owner, kind)).toEqual([0, 1, 2]);

    // A partial update changes what it names; nothing, an unknown field or another id is refused.
    const changed = await ok<Item>(
      asUser(owner.token, 'PATCH', `/v1/me/about/${kind}/${full.id}`, described.change),
    );
    expect(changed).toEqual({ ...full, ...described.change });
    const empty = await asUser(owner.token, 'PATCH', `/v1/me/about/${kind}/${full.id}`, {});
    expect(empty.statusCode, empty.body).toBe(422);
    expect(empty.json().error.fields).toEqual([
      { in: 'body', field: '(body)', message: 'must NOT have fewer than 1 properties' },
    ]);
    expectRefusal(
      await asUser(owner.token, 'PATCH', `/v1/me/about/${kind}/${full.id}`, { position: 3 }),
      422,
      { field: 'body position' },
    );
    expectRefusal(
      await asUser(
        owner.token,
        'PATCH',
        `/v1/me/about/${kind}/${described.prefix}_nothing`,
        described.change,
      ),
      404,
    );

    // A new order: exactly the owner's ids, each once.
    const order = [third.id, full.id, required.id];
    const reordered = await ok<Page<Item>>(
      asUser(owner.token, 'PUT', `/v1/me/about/${kind}/order`, { ids: order }),
    );
    expect(reordered).toEqual(whole([third, changed, required]));
    expect(await positions(owner, kind)).toEqual([0, 1, 2]);
    for (const ids of [
      [third.id, full.id],
      [third.id, full.id, required.id, `${described.prefix}_other`],
      [third.id, full.id, required.id, third.id],
      [],
    ]) {
      expectRefusal(await asUser(owner.token, 'PUT', `/v1/me/about/${kind}/order`, { ids }), 422, {
        field: 'body ids',
      });
    }
    const refusal = await asUser(owner.token, 'PUT', `/v1/me/about/${kind}/order`, {
      ids: [third.id, full.id, 'x_unknown'],
    });
    expect(refusal.json().error.fields[0].message).toContain('x_unknown');
    expect(refusal.json().error.fields[0].message).toContain(required.id);
    expect(idsOf(await ownerList(owner, kind))).toEqual(order);

    // A delete: the ones after it move up; a new one goes last.
    expect(await ok(asUser(owner.token, 'DELETE', `/v1/me/about/${kind}/${full.id}`))).toEqual({
      ok: true,
      id: full.id,
    });
    expectRefusal(await asUser(owner.token, 'DELETE', `/v1/me/about/${kind}/${full.id}`), 404);
    const fourth = await create(owner, kind, described.full);
    expect(idsOf(await ownerList(owner, kind))).toEqual([third.id, required.id, fourth.id]);
    expect(await positions(owner, kind)).toEqual([0, 1, 2]);
  });

  it('are listed to the app’s server only while their section is published', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);
    const items = [await create(owner, kind, described.full), await create(owner, kind, described.required)];

    // No section: nothing shown, though the owner sees them.
    expect(await visitorList(key, owner, kind)).toEqual(EMPTY);
    expect((await ownerList(owner, kind)).items).toEqual(items);
    const section = await addSection(owner, kind);
    expect(section).toEqual({ id: expect.stringMatching(/^sec_/), kind, position: 0, status: 'draft' });
    expect(await visitorList(key, owner, kind)).toEqual(EMPTY);

    expect(await setStatus(owner, section.id, 'published')).toEqual({ ...section, status: 'published' });
    expect(await visitorList(key, owner, kind)).toEqual({ items, next_cursor: null });
    // Another kind's section shows nothing of this kind.
    for (const other of KIND_NAMES.filter((name) => name !== kind)) {
      expect(await visitorList(key, owner, other)).toEqual(EMPTY);
    }

    await setStatus(owner, section.id, 'draft');
    expect(await visitorList(key, owner, kind)).toEqual(EMPTY);
    await setStatus(owner, section.id, 'published');
    // Deleting the section keeps the items, unlisted until a section of the kind is back.
    expect(await ok(asUser(owner.token, 'DELETE', `/v1/me/about/sections/${section.id}`))).toEqual({
      ok: true,
      id: section.id,
    });
    expect(await visitorList(key, owner, kind)).toEqual(EMPTY);
    expect((await ownerList(owner, kind)).items).toEqual(items);
    await addSection(owner, kind, 'published');
    expect(await visitorList(key, owner, kind)).toEqual({ items, next_cursor: null });
    expectRefusal(await read(key, `/v1/profiles/nobody_${tag()}/${kind}`), 404);
  });
});

describe('sections', () => {
  it('are one per kind, go last, and show the app’s server the published ones renumbered from 0', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);
    const services = await addSection(owner, 'services');
    const catalog = await addSection(owner, 'catalog', 'published');
    const faqs = await addSection(owner, 'faqs', 'published');
    expect([services, catalog, faqs]).toEqual([
      { id: expect.any(String), kind: 'services', position: 0, status: 'draft' },
      { id: expect.any(String), kind: 'catalog', position: 1, status: 'published' },
      { id: expect.any(String), kind: 'faqs', position: 2, status: 'published' },
    ]);
    expectRefusal(
      await asUser(owner.token, 'POST', '/v1/me/about/sections', { kind: 'catalog', status: 'draft' }),
      409,
      { code: 'SECTION_EXISTS' },
    );
    expectRefusal(await asUser(owner.token, 'POST', '/v1/me/about/sections', { kind: 'blog' }), 422, {
      field: 'body kind',
    });
    expectRefusal(await asUser(owner.token, 'POST', '/v1/me/about/sections', {}), 422, {
      field: 'body kind',
    });

    expect(await ownerList<Section>(owner, 'sections')).toEqual(whole([services, catalog, faqs]));
    expect(await visitorList<Section>(key, owner, 'sections')).toEqual(whole([at(catalog, 0), at(faqs, 1)]));

    // A new order: every section once.
    const reordered = await ok<Page<Section>>(
      asUser(owner.token, 'PUT', '/v1/me/about/sections/order', { ids: [faqs.id, services.id, catalog.id] }),
    );
    expect(reordered).toEqual(whole([at(faqs, 0), at(services, 1), at(catalog, 2)]));
    expect(await visitorList<Section>(key, owner, 'sections')).toEqual(whole([at(faqs, 0), at(catalog, 1)]));
    for (const ids of [[faqs.id, services.id], [faqs.id, services.id, catalog.id, 'sec_other'], []]) {
      expectRefusal(await asUser(owner.token, 'PUT', '/v1/me/about/sections/order', { ids }), 422, {
        field: 'body ids',
      });
    }

    // Publishing and unpublishing; a delete moves the later ones up.
    expect(await setStatus(owner, services.id, 'published')).toEqual({
      ...services,
      position: 1,
      status: 'published',
    });
    expect(idsOf(await visitorList<Section>(key, owner, 'sections'))).toEqual([
      faqs.id,
      services.id,
      catalog.id,
    ]);
    expectRefusal(
      await asUser(owner.token, 'PATCH', `/v1/me/about/sections/${services.id}`, { status: 'hidden' }),
      422,
      { field: 'body status' },
    );
    expectRefusal(await asUser(owner.token, 'PATCH', `/v1/me/about/sections/${services.id}`, {}), 422, {
      field: 'body status',
    });
    expectRefusal(
      await asUser(owner.token, 'PATCH', '/v1/me/about/sections/sec_nothing', { status: 'draft' }),
      404,
    );
    await ok(asUser(owner.token, 'DELETE', `/v1/me/about/sections/${faqs.id}`));
    expect(await ownerList<Section>(owner, 'sections')).toEqual(
      whole([{ ...services, position: 0, status: 'published' }, at(catalog, 1)]),
    );
    expect(await positions(owner, 'sections')).toEqual([0, 1]);
    // The kind is free again, and its new section goes last.
    expect(await addSection(owner, 'faqs')).toMatchObject({ kind: 'faqs', position: 2, status: 'draft' });
  });

  it('come a page at a time, for the owner and the visitor', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);
    const faqs = await addSection(owner, 'faqs', 'published');
    const services = await addSection(owner, 'services');
    const catalog = await addSection(owner, 'catalog', 'published');

    const first = await ownerList<Section>(owner, 'sections', '?limit=2');
    expect(first.items).toEqual([faqs, services]);
    const second = await ownerList<Section>(owner, 'sections', `?limit=2&cursor=${first.next_cursor}`);
    expect(second).toEqual(whole([catalog]));

    // The visitor's positions count the published sections only; the cursor goes by them.
    const visible = await visitorList<Section>(key, owner, 'sections', '?limit=1');
    expect(visible.items).toEqual([at(faqs, 0)]);
    expect(
      await visitorList<Section>(key, owner, 'sections', `?limit=1&cursor=${visible.next_cursor}`),
    ).toEqual(whole([at(catalog, 1)]));
  });
});

describe('catalog items', () => {
  const attempt = (owner: Member, fields: object) =>
    asUser(owner.token, 'POST', '/v1/me/about/catalog', { ...KINDS.catalog.required, ...fields });

  it('take a decimal price_amount string, kept as written, and price_currency coin or usd', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);
    for (const price_amount of ['0', '12.5', '1.123456', '0.000001', '10.50', '999999999999.999999']) {
      expect((await ok<Item>(attempt(owner, { price_amount }))).price_amount).toBe(price_amount);
    }
    for (const price_amount of [
      '1.',
      '-1',
      '01',
      '1e3',
      '1.1234567',
      '',
      '.5',
      '1,5',
      ' 1',
      '1000000000000',
      12.5,
      null,
    ]) {
      expectRefusal(await attempt(owner, { price_amount }), 422, { field: 'body price_amount' });
    }
    const item = await ok<Item>(attempt(owner, {}));
    expectRefusal(
      await asUser(owner.token, 'PATCH', `/v1/me/about/catalog/${item.id}`, { price_amount: '2.' }),
      422,
      { field: 'body price_amount' },
    );
    for (const price_currency of ['coin', 'usd']) {
      expect((await ok<Item>(attempt(owner, { price_currency }))).price_currency).toBe(price_currency);
    }
    for (const price_currency of ['eur', 'USD', '']) {
      expectRefusal(await attempt(owner, { price_currency }), 422, { field: 'body price_currency' });
    }
    const { price_amount: _amount, ...withoutPrice } = KINDS.catalog.required;
    expectRefusal(await asUser(owner.token, 'POST', '/v1/me/about/catalog', withoutPrice), 422, {
      field: 'body price_amount',
    });
  });

  it('take 0 to 10 https image URLs of up to 2,048 characters', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);
    const url = (n: number) => `https://img.example.com/${n}.png`;
    const longest = `https://img.example.com/${'a'.repeat(2_048 - 'https://img.example.com/'.length)}`;
    for (const images of [
      [],
      range(10).map(url),
      [longest],
      ['https://img.example.com:8443/a%20b.png?w=2#top'],
    ]) {
      expect((await ok<Item>(attempt(owner, { images }))).images).toEqual(images);
    }
    for (const bad of [
      'http://img.example.com/a.png',
      'ftp://img.example.com/a.png',
      'https://',
      'https:///a.png',
      'https://user:secret@img.example.com/a.png',
      'javascript:alert(1)',
      'img.example.com/a.png',
      'https://img.example.com/a b.png',
      `${longest}b`,
    ]) {
      expectRefusal(await attempt(owner, { images: [url(1), bad] }), 422, { field: 'body images.1' });
    }
    expectRefusal(await attempt(owner, { images: range(11).map(url) }), 422, { field: 'body images' });
    expectRefusal(await attempt(owner, { images: 'https://img.example.com/a.png' }), 422, {
      field: 'body images',
    });
  });
});

describe('text fields', () => {
  it('hold names and answers within their lengths, with no control characters', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);
    const accepted: [Kind, object][] = [
      ['services', { name: 'n'.repeat(100), duration: 'd'.repeat(50), category: 'c'.repeat(50) }],
      ['services', { name: 'x', duration: '', category: '' }],
      ['catalog', { ...KINDS.catalog.required, department: 'd'.repeat(50) }],
      ['faqs', { question: 'q'.repeat(300), answer: 'a'.repeat(2_000) }],
      ['faqs', { question: '¿Qué tal?', answer: 'Line one\nline two\ttabbed' }],
    ];
    for (const [kind, body] of accepted) expect(await create(owner, kind, body)).toMatchObject(body);

    const refused: [Kind, object, string][] = [
      ['services', { name: 'n'.repeat(101) }, 'name'],
      ['services', { name: '' }, 'name'],
      ['services', { name: ' padded' }, 'name'],
      ['services', { name: 'x', duration: 'd'.repeat(51) }, 'duration'],
      ['services', { name: 'x', category: 'c'.repeat(51) }, 'category'],
      ['services', { name: 'x', duration: 'two\nlines' }, 'duration'],
      ['services', { name: 'x', accepts_bookings: 'yes' }, 'accepts_bookings'],
      ['services', { duration: '1 h' }, 'name'],
      ['catalog', { ...KINDS.catalog.required, department: 'd'.repeat(51) }, 'department'],
      ['catalog', { ...KINDS.catalog.required, in_stock: 1 }, 'in_stock'],
      ['faqs', { question: 'q'.repeat(301), answer: 'a' }, 'question'],
      ['faqs', { question: 'two\nlines?', answer: 'a' }, 'question'],
      ['faqs', { question: 'q', answer: 'a'.repeat(2_001) }, 'answer'],
      ['faqs', { question: 'q', answer: '   ' }, 'answer'],
      ['faqs', { question: 'q', answer: 'bell\u0007' }, 'answer'],
      ['faqs', { question: 'q' }, 'answer'],
    ];
    for (const [kind, body, field] of refused) {
      expectRefusal(await asUser(owner.token, 'POST', `/v1/me/about/${kind}`, body), 422, {
        field: `body ${field}`,
      });
    }
    for (const kind of KIND_NAMES)
      expect((await ownerList(owner, kind)).items).toHaveLength(accepted.filter(([k]) => k === kind).length);
  });
});

describe('limits and concurrency', () => {
  it('hold 100 items of a kind per profile: the 101st is a 409 until one is deleted', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);
    // Concurrent creates of one owner take turns: every position once, none skipped.
    for (let batch = 0; batch < 100; batch += 25) {
      const replies = await Promise.all(
        range(25).map((i) =>
          asUser(owner.token, 'POST', '/v1/me/about/faqs', { question: `Q${batch + i}?`, answer: 'A' }),
        ),
      );
      expect(replies.map((reply) => reply.statusCode)).toEqual(Array(25).fill(200));
    }
    expect(await positions(owner, 'faqs')).toEqual(range(100));
    const over = await asUser(owner.token, 'POST', '/v1/me/about/faqs', {
      question: 'One too many?',
      answer: 'A',
    });
    expectRefusal(over, 409, { code: 'ITEM_LIMIT_REACHED' });
    expect(over.json().error.message).toContain('at most 100 FAQ entries');
    expect(over.headers['x-svc-cost-usd']).toBe(FREE);
    // Other kinds have limits of their own.
    await create(owner, 'services', { name: 'Still fine' });

    // Every page in display order, then the last one freed makes room for one more.
    const seen: Item[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: Page<Item> = await ownerList(owner, 'faqs', `?limit=7${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...page.items);
      cursor = page.next_cursor;
      pages += 1;
    } while (cursor !== null && pages < 50);
    expect(pages).toBe(15);
    expect(seen.map((item) => item.id)).toEqual((await stored(owner, 'faqs')).map((row) => row.id));
    expect(new Set(seen.map((item) => item.id)).size).toBe(100);
    expect(await ok(asUser(owner.token, 'DELETE', `/v1/me/about/faqs/${seen[42]!.id}`))).toEqual({
      ok: true,
      id: seen[42]!.id,
    });
    expect(await positions(owner, 'faqs')).toEqual(range(99));
    await create(owner, 'faqs', { question: 'Room again?', answer: 'Yes' });
    expectRefusal(
      await asUser(owner.token, 'POST', '/v1/me/about/faqs', { question: 'And again?', answer: 'A' }),
      409,
    );
    // A reorder of all 100 answers them all on one page.
    const reversed = seen
      .filter((_, i) => i !== 42)
      .map((item) => item.id)
      .reverse();
    const all = idsOf(await ownerList(owner, 'faqs', '?limit=100'));
    const order = [all[99]!, ...reversed];
    const answered = await ok<Page<Item>>(
      asUser(owner.token, 'PUT', '/v1/me/about/faqs/order', { ids: order }),
    );
    expect(idsOf(answered)).toEqual(order);
    expect(answered.next_cursor).toBeNull();
    expect(await positions(owner, 'faqs')).toEqual(range(100));
  });

  it('keep positions unique when one owner writes many things at once', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);
    const [first, second] = [
      await create(owner, 'services', { name: 'A' }),
      await create(owner, 'services', { name: 'B' }),
    ];
    const replies = await Promise.all([
      ...range(20).map((i) => asUser(owner.token, 'POST', '/v1/me/about/services', { name: `S${i}` })),
      asUser(owner.token, 'DELETE', `/v1/me/about/services/${first.id}`),
      asUser(owner.token, 'PATCH', `/v1/me/about/services/${second.id}`, { name: 'B2' }),
      ...KIND_NAMES.map((kind) => asUser(owner.token, 'POST', '/v1/me/about/sections', { kind })),
      // The same kind twice at once: one section, one 409.
      asUser(owner.token, 'POST', '/v1/me/about/sections', { kind: 'faqs' }),
    ]);
    expect(replies.map((reply) => reply.statusCode).sort()).toEqual([...Array(25).fill(200), 409]);
    expect(await positions(owner, 'services')).toEqual(range(21));
    expect(await positions(owner, 'sections')).toEqual(range(3));
    expect(new Set((await ownerList<Section>(owner, 'sections')).items.map((s) => s.kind))).toEqual(
      new Set(KIND_NAMES),
    );
  });
});

describe('owners', () => {
  it('change only their own items: another user’s are a 404, and the same ids no order of theirs', async () => {
    const { token: key } = await liveApp();
    const alice = await member(key);
    const bob = await member(key);
    const service = await create(alice, 'services', { name: 'Alice’s' });
    const section = await addSection(alice, 'services', 'published');
    await create(bob, 'services', { name: 'Bob’s' });

    expectRefusal(
      await asUser(bob.token, 'PATCH', `/v1/me/about/services/${service.id}`, { name: 'Taken' }),
      404,
    );
    expectRefusal(await asUser(bob.token, 'DELETE', `/v1/me/about/services/${service.id}`), 404);
    expectRefusal(
      await asUser(bob.token, 'PATCH', `/v1/me/about/sections/${section.id}`, { status: 'draft' }),
      404,
    );
    expectRefusal(await asUser(bob.token, 'DELETE', `/v1/me/about/sections/${section.id}`), 404);
    expectRefusal(await asUser(bob.token, 'PUT', '/v1/me/about/services/order', { ids: [service.id] }), 422, {
      field: 'body ids',
    });
    // Through another kind's routes, an id is no item either.
    expectRefusal(await asUser(alice.token, 'DELETE', `/v1/me/about/faqs/${service.id}`), 404);

    expect(await visitorList(key, alice, 'services')).toEqual(whole([service]));
    expect(await visitorList<Section>(key, alice, 'sections')).toEqual(whole([section]));
    expect((await ownerList(bob, 'services')).items.map((item) => item.name)).toEqual(['Bob’s']);
  });

  it('need a profile: 409 PROFILE_REQUIRED, and 404 on deletes', async () => {
    const { token: key } = await liveApp();
    const someone = await member(key);
    const item = await create(someone, 'catalog', KINDS.catalog.required);
    const token = await mintToken(key, `nobody-${tag()}`);
    for (const [method, url, body] of [
      ['GET', '/v1/me/about/sections'],
      ['POST', '/v1/me/about/sections', { kind: 'faqs' }],
      ['PATCH', '/v1/me/about/sections/sec_x', { status: 'published' }],
      ['PUT', '/v1/me/about/sections/order', { ids: [] }],
      ['GET', '/v1/me/about/catalog'],
      ['POST', '/v1/me/about/catalog', KINDS.catalog.required],
      ['PATCH', `/v1/me/about/catalog/${item.id}`, { name: 'Mine now' }],
      ['PUT', '/v1/me/about/catalog/order', { ids: [item.id] }],
    ] as [Method, string, object?][]) {
      expectRefusal(await asUser(token, method, url, body), 409, { code: 'PROFILE_REQUIRED' });
    }
    expectRefusal(await asUser(token, 'DELETE', `/v1/me/about/catalog/${item.id}`), 404);
    expectRefusal(await asUser(token, 'DELETE', '/v1/me/about/sections/sec_x'), 404);
    // A secret key is not a user, and a user token is not the app's server.
    expectRefusal(await callWithKey(ctx.app, key, 'GET', '/v1/me/about/catalog'), 401);
    expectRefusal(await asUser(someone.token, 'GET', `/v1/profiles/${someone.username}/catalog`), 401);
  });
});

describe('pages', () => {
  it('go in display order a page at a time, and refuse a cursor this API did not give for them', async () => {
    const { token: key } = await liveApp();
    const owner = await member(key);
    await addSection(owner, 'services', 'published');
    const made = [];
    for (const i of range(5)) made.push(await create(owner, 'services', { name: `S${i}` }));
    const order = [made[3]!, made[0]!, made[4]!, made[1]!, made[2]!];
    await ok(
      asUser(owner.token, 'PUT', '/v1/me/about/services/order', {
        ids: order.map((item) => item.id),
      }),
    );

    for (const list of [
      (q: string) => ownerList(owner, 'services', q),
      (q: string) => visitorList(key, owner, 'services', q),
    ]) {
      const first = await list('?limit=2');
      expect(first.items).toEqual(order.slice(0, 2));
      const second = await list(`?limit=2&cursor=${first.next_cursor}`);
      expect(second.items).toEqual(order.slice(2, 4));
      expect(await list(`?limit=2&cursor=${second.next_cursor}`)).toEqual(whole(order.slice(4)));
      expect((await list('')).items).toEqual(order);
    }
    // A newest-first cursor of this API is no cursor of a list in display order.
    for (const text of ['one', 'two']) {
      ctx.clock.advance(1);
      await ok(asUser(owner.token, 'POST', '/v1/me/buzzes', { text }));
    }
    const timeCursor = (await read(key, '/v1/buzzes?limit=1')).json().next_cursor;
    expect(timeCursor).toEqual(expect.any(String));
    const edited = (await ownerList(owner, 'services', '?limit=1')).next_cursor!.slice(0, -2);
    for (const cursor of ['garbage', edited, timeCursor]) {
      expectRefusal(await read(key, `/v1/profiles/${owner.username}/services?cursor=${cursor}`), 422, {
        field: 'query cursor',
      });
    }
    for (const query of ['limit=0', 'limit=101', 'limit=1e1', 'other=1']) {
      expect((await read(key, `/v1/profiles/${owner.username}/services?${query}`)).statusCode).toBe(422);
    }
    expect((await visitorList(key, owner, 'services', '?limit=100')).items).toHaveLength(5);
  });
});

describe('prices', () => {
  it('charge each write of a live key one writes.calls; reads and refusals are free', async () => {
    const { token: key, account } = await liveApp();
    const owner = await member(key);
    const before = (await ctx.container.billing.getBalance(account.id)).balance_micros;
    const costs: [string, number, string][] = [];
    const call = async (what: string, reply: Promise<Reply>) => {
      const done = await reply;
      costs.push([what, done.statusCode, String(done.headers['x-svc-cost-usd'])]);
      return done;
    };
    const section = (
      await call('section', asUser(owner.token, 'POST', '/v1/me/about/sections', { kind: 'catalog' }))
    ).json();
    await call(
      'publish',
      asUser(owner.token, 'PATCH', `/v1/me/about/sections/${section.id}`, { status: 'published' }),
    );
    await call(
      'order sections',
      asUser(owner.token, 'PUT', '/v1/me/about/sections/order', { ids: [section.id] }),
    );
    const item = (
      await call('create', asUser(owner.token, 'POST', '/v1/me/about/catalog', KINDS.catalog.required))
    ).json();
    await call(
      'update',
      asUser(owner.token, 'PATCH', `/v1/me/about/catalog/${item.id}`, { in_stock: false }),
    );
    await call('order', asUser(owner.token, 'PUT', '/v1/me/about/catalog/order', { ids: [item.id] }));
    await call('delete', asUser(owner.token, 'DELETE', `/v1/me/about/catalog/${item.id}`));
    await call('delete section', asUser(owner.token, 'DELETE', `/v1/me/about/sections/${section.id}`));
    await call('own list', asUser(owner.token, 'GET', '/v1/me/about/catalog'));
    await call('own sections', asUser(owner.token, 'GET', '/v1/me/about/sections'));
    await call('visitor list', read(key, `/v1/profiles/${owner.username}/catalog`));
    await call('visitor sections', read(key, `/v1/profiles/${owner.username}/sections`));
    await call('invalid', asUser(owner.token, 'POST', '/v1/me/about/catalog', { name: 'No price' }));
    await call('missing', asUser(owner.token, 'DELETE', `/v1/me/about/catalog/${item.id}`));

    const write = (what: string): [string, number, string] => [what, 200, WRITE_COST];
    const free = (what: string, status = 200): [string, number, string] => [what, status, FREE];
    expect(costs).toEqual([
      write('section'),
      write('publish'),
      write('order sections'),
      write('create'),
      write('update'),
      write('order'),
      write('delete'),
      write('delete section'),
      free('own list'),
      free('own sections'),
      free('visitor list'),
      free('visitor sections'),
      free('invalid', 422),
      free('missing', 404),
    ]);
    const after = (await ctx.container.billing.getBalance(account.id)).balance_micros;
    expect(before - after).toBe(8 * WRITE_MICROS);
  });
});

describe('the sandbox', () => {
  it('gives a test key’s app About content: published sections in order, drafts and missing ones empty', async () => {
    const { token: key, app } = await createCustomer(ctx.container);
    const lily = { userId: 'sandbox-lily', username: 'lilybakes', token: '' };
    const lilySections = await visitorList<Section>(key, lily, 'sections');
    expect(lilySections.items.map(({ kind, position, status }) => ({ kind, position, status }))).toEqual([
      { kind: 'catalog', position: 0, status: 'published' },
      { kind: 'faqs', position: 1, status: 'published' },
    ]);
    const catalog = await visitorList(key, lily, 'catalog');
    expect(catalog.items[0]).toEqual({
      id: expect.stringMatching(/^cat_sbx_[0-9a-f]{20}_\d{3}$/),
      name: 'Sourdough loaf',
      department: 'Bread',
      price_amount: '6.50',
      price_currency: 'usd',
      in_stock: true,
      images: [
        'https://images.example.com/sandbox/lily/sourdough.jpg',
        'https://images.example.com/sandbox/lily/crumb.jpg',
      ],
    });
    expect(catalog.items.map((item) => item.name)).toEqual(
      ABOUT_FIXTURES.lily!.catalog!.map(([name]) => name),
    );
    expect((await visitorList(key, lily, 'faqs')).items[0]).toEqual({
      id: expect.stringMatching(/^faq_sbx_/),
      question: 'Do you bake gluten-free bread?',
      answer: 'Yes, on Fridays: order by Wednesday.',
      category: 'Products',
    });
    // Lily's services section is a draft: nothing shown, though she sees hers.
    expect(await visitorList(key, lily, 'services')).toEqual(EMPTY);
    const asLily = await mintToken(key, lily.userId);
    expect((await ownerList({ ...lily, token: asLily }, 'services')).items).toEqual([
      {
        id: expect.stringMatching(/^srv_sbx_/),
        name: 'Custom cake consultation',
        duration: '30 min',
        category: 'Cakes',
        accepts_bookings: true,
      },
    ]);
    expect(
      (await ownerList<Section>({ ...lily, token: asLily }, 'sections')).items.map((s) => s.status),
    ).toEqual(['published', 'published', 'draft']);

    // Javier has catalog items and no catalog section; Marcus sells in coins.
    const javier = { userId: 'sandbox-javier', username: 'javi_cocina', token: '' };
    expect(await visitorList(key, javier, 'catalog')).toEqual(EMPTY);
    expect((await visitorList(key, javier, 'services')).items.map((item) => item.name)).toEqual([
      'Clase de cocina',
      'Cena privada',
      'Menú semanal',
    ]);
    const marcus = { userId: 'sandbox-marcus', username: 'marcus_beats', token: '' };
    expect((await visitorList(key, marcus, 'catalog')).items[0]).toMatchObject({
      price_amount: '500',
      price_currency: 'coin',
    });
    expect(
      (await visitorList(key, { userId: '', username: 'cafe_del_sol', token: '' }, 'faqs')).items,
    ).toHaveLength(2);

    // Another test app has its own ids; a live key sees no sandbox at all.
    const other = (await createCustomer(ctx.container)).token;
    const elsewhere = await visitorList(other, lily, 'catalog');
    expect(elsewhere.items.map((item) => item.name)).toEqual(catalog.items.map((item) => item.name));
    expect(idsOf(elsewhere)).not.toEqual(idsOf(catalog));
    const live = await ctx.container.accounts.createKey({ appId: app.id, kind: 'secret', mode: 'live' });
    expectRefusal(await read(live.token, '/v1/profiles/lilybakes/catalog'), 404);
    expect(
      await ctx.container.pool.anyFirst(
        sql.type(
          z.object({ part: z.string() }),
        )`select part from sandboxes where app_id = ${app.id} order by part`,
      ),
    ).toContain('about');
  });
});
