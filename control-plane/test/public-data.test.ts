/**
 * Public data against the real PostgreSQL and Redis: profiles, buzzes, reactions, comments, follows
 * and search, called as an app's users (user tokens minted through the API) and as the app's server
 * (its secret key). Counters are recounted from the rows, also after 200 users write at once; prices,
 * per-user caps, events, the isolation of apps and key modes, and the test mode's sandbox.
 */
import { randomBytes } from 'node:crypto';
import { type QuerySqlToken, sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db } from '../src/db/transaction.js';
import {
  DEFAULT_SEARCH_PER_GROUP,
  MAX_SEARCH_PER_GROUP,
  REACTION_KINDS,
  SEARCH_BUZZ_CANDIDATES,
  SEARCH_BUZZ_WALK,
  SEARCH_PROFILE_NEAREST,
  USER_LIMITS,
} from '../src/modules/social/schema.js';
import { searchStore } from '../src/modules/social/search-store.js';
import type { Scope } from '../src/modules/social/store.js';
import { createManualClock } from '../src/platform/clock.js';
import { ledgerTotals } from './ledger.js';
import { callWithKey, createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

/** `writes.calls` at its default price, as the cost header writes it. */
const WRITE_COST = '0.000500';
const WRITE_MICROS = 500;
const FREE = '0.000000';
const FUNDS = 10_000_000;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type Reply = Awaited<ReturnType<typeof callWithKey>>;

interface Member {
  userId: string;
  username: string;
  token: string;
}

interface Buzz {
  id: string;
  type: string;
  text: string;
  reactions: number;
  comments: number;
  created_at: string;
  author_id: string;
  author_username: string;
}

interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/** Eight hex characters: the names and ids of one test never meet another's, nor the sandbox's. */
const tag = () => randomBytes(4).toString('hex');
const b64 = (text: string) => Buffer.from(text).toString('base64url');
const idsOf = (page: Page<{ id: string }>) => page.items.map((item) => item.id);

/** A call as the app's user, with the user token its server minted, from an address of its own. */
function asUser(token: string, method: Method, url: string, payload?: object, on = ctx) {
  return on.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: uniqueAddress(),
    ...(payload ? { payload } : {}),
  });
}

/** A read of the app's server, with its secret key. */
const read = (key: string, url: string, on = ctx) => callWithKey(on.app, key, 'GET', url);

async function mintToken(key: string, userId: string, on = ctx): Promise<string> {
  const minted = await callWithKey(on.app, key, 'POST', `/v1/users/${encodeURIComponent(userId)}/tokens`, {});
  expect(minted.statusCode, minted.body).toBe(200);
  return minted.json().token;
}

/** A user of the app with a token and a profile. */
async function member(
  key: string,
  username: string,
  profile: { full_name?: string; category?: string } = {},
  on = ctx,
  userId = `user-${tag()}`,
): Promise<Member> {
  const token = await mintToken(key, userId, on);
  const put = await asUser(token, 'PUT', '/v1/me/profile', { username, ...profile }, on);
  expect(put.statusCode, put.body).toBe(200);
  return { userId, username, token };
}

/** Publishes a buzz a millisecond after the previous one, so that newest first is one order. */
async function publish(author: Member, text: string, on = ctx): Promise<Buzz> {
  on.clock.advance(1);
  const published = await asUser(author.token, 'POST', '/v1/me/buzzes', { text }, on);
  expect(published.statusCode, published.body).toBe(200);
  return published.json();
}

/** A store's statements explained instead of run (or run, and explained, with `analyze`). */
const explaining = (db: Db, analyze = false): Db =>
  ({
    ...db,
    any: (query: QuerySqlToken) =>
      db.any(sql.unsafe`explain (format json${analyze ? sql.fragment`, analyze` : sql.fragment``}) ${query}`),
  }) as Db;
/** Every object of an `explain (format json)` answer, however deep: its plan nodes among them. */
function planNodes(plan: unknown): Record<string, unknown>[] {
  if (Array.isArray(plan)) return plan.flatMap(planNodes);
  if (typeof plan !== 'object' || plan === null) return [];
  return [plan as Record<string, unknown>, ...Object.values(plan).flatMap(planNodes)];
}
const field = (node: Record<string, unknown>, name: string) =>
  typeof node[name] === 'number' ? (node[name] as number) : 0;
const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

/** The indexes a plan reads, each as its node's type and the index's name ('Index Scan buzzes_pkey'). */
const indexesRead = (plan: unknown) =>
  planNodes(plan)
    .filter((node) => typeof node['Index Name'] === 'string')
    .map((node) => `${node['Node Type']} ${node['Index Name']}`);

/** The rows a plan run with `analyze` read from tables and indexes, whether it kept them or not. */
const rowsRead = (plan: unknown, counted: (node: Record<string, unknown>) => boolean = () => true) =>
  sum(
    planNodes(plan)
      .filter((node) => String(node['Node Type']).endsWith('Scan') && counted(node))
      .map(
        (node) =>
          (field(node, 'Actual Rows') +
            field(node, 'Rows Removed by Filter') +
            field(node, 'Rows Removed by Index Recheck')) *
          field(node, 'Actual Loops'),
      ),
  );

/**
 * How often `run` scanned each of `indexes` on one of search's connections, and the entries each gave,
 * from PostgreSQL's counters of the connection read before and after it in one transaction (they also
 * hold earlier transactions' counts not yet reported). Search's reads in its functions (migrations 0041,
 * 0042, 0043) are statements an `explain` of the search does not show.
 */
async function indexReads<Index extends string>(
  indexes: readonly Index[],
  run: (db: Db) => Promise<unknown>,
) {
  const Counted = z.object({ scans: z.number(), entries: z.number() });
  return ctx.container.searchPool.transaction(async (tx) => {
    const counters = () =>
      Promise.all(
        indexes.map((index) =>
          tx.one(sql.type(Counted)`
            select pg_stat_get_xact_numscans(${index}::regclass)::int as scans,
                   pg_stat_get_xact_tuples_returned(${index}::regclass)::int as entries`),
        ),
      );
    const before = await counters();
    await run(tx);
    const after = await counters();
    return Object.fromEntries(
      indexes.map((index, i) => [
        index,
        { scans: after[i]!.scans - before[i]!.scans, entries: after[i]!.entries - before[i]!.entries },
      ]),
    ) as Record<Index, z.infer<typeof Counted>>;
  });
}

/**
 * What a buzz search read, run as the service runs it: its indexes, and the sequential scans of the
 * table (a table's scans, in PostgreSQL's counters).
 */
async function buzzSearchReads(scope: Scope, q: string) {
  const read = await indexReads(['buzzes_listing_idx', 'buzzes_words_by_week_idx', 'buzzes'], (tx) =>
    searchStore(tx).searchBuzzes(scope, q, 20),
  );
  return {
    listing: read.buzzes_listing_idx,
    words: read.buzzes_words_by_week_idx,
    sequential: read.buzzes.scans,
  };
}

/**
 * How many times a plan run with `analyze` looked for names close to the query among all of the app's
 * profiles (the walk, a search index, or whatever scan a small table gets): a scan of `profiles` that
 * tests the name with `<%`, other than the verified ones'.
 */
const namesSearched = (plan: unknown) =>
  sum(
    planNodes(plan)
      .filter((node) => node['Relation Name'] === 'profiles')
      .filter((node) => {
        const conditions = ['Filter', 'Index Cond', 'Recheck Cond'].map((name) => String(node[name] ?? ''));
        return (
          conditions.some((condition) => /<% search_name|search_name %>/.test(condition)) &&
          !conditions.some((condition) => condition.includes('verified'))
        );
      })
      .map((node) => field(node, 'Actual Loops')),
  );

/**
 * The rows a plan run with `analyze` read looking for names close to the query: all but the exact
 * username's lookup, which on a small table the planner may make through any index of the app's.
 */
const rowsSearched = (plan: unknown) =>
  rowsRead(
    plan,
    (node) => !['Filter', 'Index Cond'].some((name) => String(node[name] ?? '').includes('lower(username)')),
  );

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/** All the calls' answers, or a failure saying how many answered in time (a stalled pool never does). */
async function settleWithin<T>(calls: Promise<T>[], ms: number): Promise<T[]> {
  let answered = 0;
  const all = Promise.all(
    calls.map(async (c) => {
      const value = await c;
      answered += 1;
      return value;
    }),
  );
  const late = sleep(ms).then(() => 'late' as const);
  const settled = await Promise.race([all, late]);
  if (settled === 'late')
    throw new Error(`only ${answered} of ${calls.length} calls answered within ${ms} ms`);
  return settled;
}

function expectError(reply: Reply, status: number, code?: string) {
  expect(reply.statusCode, reply.body).toBe(status);
  if (code !== undefined) expect(reply.json().error.code).toBe(code);
}

/** A 422 whose field errors all name one field. */
function expectInvalid(reply: Reply, place: 'body' | 'query' | 'path', field: string) {
  expect(reply.statusCode, reply.body).toBe(422);
  expect(reply.json().error.type).toBe('invalid_request');
  const named = reply.json().error.fields.map((f: { in: string; field: string }) => `${f.in} ${f.field}`);
  expect([...new Set(named)]).toEqual([`${place} ${field}`]);
}

async function profileOf(key: string, username: string, on = ctx) {
  const profile = await read(key, `/v1/profiles/${username}`, on);
  expect(profile.statusCode, profile.body).toBe(200);
  return profile.json();
}

async function buzzOf(key: string, id: string, on = ctx): Promise<Buzz> {
  const buzz = await read(key, `/v1/buzzes/${id}`, on);
  expect(buzz.statusCode, buzz.body).toBe(200);
  return buzz.json();
}

/** Every page of a listing, following next_cursor to the end. */
async function allPages<T>(key: string, url: string, limit: number) {
  const items: T[] = [];
  const sizes: number[] = [];
  let cursor: string | null = null;
  do {
    const separator = url.includes('?') ? '&' : '?';
    const page = await read(key, `${url}${separator}limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(page.statusCode, page.body).toBe(200);
    const body = page.json<Page<T>>();
    items.push(...body.items);
    sizes.push(body.items.length);
    cursor = body.next_cursor;
  } while (cursor !== null && sizes.length < 1_000);
  return { items, sizes };
}

/** Profiles and buzzes of an app and mode whose counters differ from a recount of their rows. */
async function miscounted(appId: string, mode: 'test' | 'live') {
  const profiles = await ctx.container.pool.any(sql.unsafe`
    select p.username, p.followers, p.following, p.buzzes,
      (select count(*)::int from follows f where f.followee_pk = p.pk) as followers_rows,
      (select count(*)::int from follows f where f.follower_pk = p.pk) as following_rows,
      (select count(*)::int from buzzes b where b.author_pk = p.pk and b.deleted_at is null) as buzzes_rows
    from profiles p where p.app_id = ${appId} and p.mode = ${mode}`);
  const buzzes = await ctx.container.pool.any(sql.unsafe`
    select b.id, b.reactions, b.comments,
      (select count(*)::int from buzz_reactions r where r.buzz_pk = b.pk) as reactions_rows,
      (select count(*)::int from buzz_comments c where c.buzz_pk = b.pk) as comments_rows
    from buzzes b where b.app_id = ${appId} and b.mode = ${mode}`);
  return {
    profiles: profiles.length,
    buzzes: buzzes.length,
    wrongProfiles: profiles.filter(
      (p) =>
        p.followers !== p.followers_rows || p.following !== p.following_rows || p.buzzes !== p.buzzes_rows,
    ),
    wrongBuzzes: buzzes.filter((b) => b.reactions !== b.reactions_rows || b.comments !== b.comments_rows),
  };
}

describe('profiles', () => {
  it('are created, then replaced whole, by PUT /v1/me/profile, and read by username in any case', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const userId = `ada-${tag()}`;
    const token = await mintToken(key, userId);
    expectError(await asUser(token, 'GET', '/v1/me/profile'), 409, 'PROFILE_REQUIRED');

    const username = `Ada_${tag()}`;
    const createdAt = ctx.clock.now().toISOString();
    const created = await asUser(token, 'PUT', '/v1/me/profile', {
      username,
      full_name: 'Ada Lovelace',
      category: 'mathematician',
    });
    expect(created.statusCode, created.body).toBe(200);
    expect(created.json()).toEqual({
      id: userId,
      username,
      full_name: 'Ada Lovelace',
      category: 'mathematician',
      followers: 0,
      following: 0,
      buzzes: 0,
      verified: false,
      created_at: createdAt,
    });

    ctx.clock.advance(1_000);
    const replaced = await asUser(token, 'PUT', '/v1/me/profile', { username, full_name: 'Countess' });
    expect(replaced.statusCode, replaced.body).toBe(200);
    // A replacement: what is not sent is back to its default; the id and the creation time stay.
    expect(replaced.json()).toEqual({ ...created.json(), full_name: 'Countess', category: '' });
    expect((await asUser(token, 'GET', '/v1/me/profile')).json()).toEqual(replaced.json());
    for (const asked of [username, username.toLowerCase(), username.toUpperCase()]) {
      expect(await profileOf(key, asked)).toEqual(replaced.json());
    }
    expectError(await read(key, `/v1/profiles/nobody_${tag()}`), 404);

    const longest = { username, full_name: 'n'.repeat(100), category: 'c'.repeat(50) };
    expect((await asUser(token, 'PUT', '/v1/me/profile', longest)).json()).toMatchObject(longest);
    for (const [field, value] of [
      ['full_name', 'n'.repeat(101)],
      ['category', 'c'.repeat(51)],
      ['full_name', 'tab\there'],
      ['full_name', ' padded'],
    ] as const) {
      expectInvalid(
        await asUser(token, 'PUT', '/v1/me/profile', { username, [field]: value }),
        'body',
        field,
      );
    }
    expectInvalid(await asUser(token, 'PUT', '/v1/me/profile', { full_name: 'No Name' }), 'body', 'username');
    expect((await asUser(token, 'GET', '/v1/me/profile')).json()).toMatchObject(longest);
    expect(
      await ctx.container.pool.oneFirst(
        sql.unsafe`select count(*)::int from profiles where user_id = ${userId} and mode = 'test'`,
      ),
    ).toBe(1);
  });

  it('take usernames of 3 to 30 letters, digits, "_" and ".", a dot neither first, last nor doubled', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const token = await mintToken(key, `u-${tag()}`);
    const put = (username: string) => asUser(token, 'PUT', '/v1/me/profile', { username });
    const t = tag();
    for (const username of [
      `Q${t.slice(0, 2)}`,
      `${t}${'x'.repeat(22)}`,
      `a.b_${t}`,
      `_${t}_`,
      `${t.toUpperCase()}.9`,
    ]) {
      const accepted = await put(username);
      expect(accepted.statusCode, `${username}: ${accepted.body}`).toBe(200);
      expect(accepted.json().username).toBe(username);
    }
    for (const username of [
      t.slice(0, 2),
      `${t}${'x'.repeat(23)}`,
      `.${t}`,
      `${t}.`,
      `a..${t}`,
      `a-${t}`,
      `a ${t}`,
      `a@${t}`,
      `añ${t}`,
      `${t}é`,
      '',
    ]) {
      expectInvalid(await put(username), 'body', 'username');
    }
    // The one kept is the last accepted.
    expect((await asUser(token, 'GET', '/v1/me/profile')).json().username).toBe(`${t.toUpperCase()}.9`);
    expectInvalid(await read(key, '/v1/profiles/ab'), 'path', 'username');
    expectInvalid(await read(key, `/v1/profiles/a..${t}`), 'path', 'username');
  });

  it('are unique per app and mode without regard to case; another app and the other mode may reuse a name', async () => {
    const first = await createCustomer(ctx.container, { balanceMicros: FUNDS });
    const username = `Taken_${tag()}`;
    const owner = await member(first.token, username, { full_name: 'Owner' });
    const rival = await mintToken(first.token, `rival-${tag()}`);
    for (const variant of [username, username.toLowerCase(), username.toUpperCase()]) {
      expectError(await asUser(rival, 'PUT', '/v1/me/profile', { username: variant }), 409, 'USERNAME_TAKEN');
    }
    expectError(await asUser(rival, 'GET', '/v1/me/profile'), 409, 'PROFILE_REQUIRED');
    // Its owner may write it in another case.
    const recased = await asUser(owner.token, 'PUT', '/v1/me/profile', {
      username: username.toLowerCase(),
      full_name: 'Owner',
    });
    expect(recased.statusCode, recased.body).toBe(200);
    expect(recased.json().username).toBe(username.toLowerCase());

    const otherApp = await createCustomer(ctx.container);
    const elsewhere = await member(otherApp.token, username, { full_name: 'Elsewhere' });
    const live = await ctx.container.accounts.createKey({
      appId: first.app.id,
      kind: 'secret',
      mode: 'live',
    });
    const inLive = await member(live.token, username, { full_name: 'Live' });

    expect(await profileOf(first.token, username)).toMatchObject({ id: owner.userId, full_name: 'Owner' });
    expect(await profileOf(otherApp.token, username)).toMatchObject({
      id: elsewhere.userId,
      full_name: 'Elsewhere',
    });
    expect(await profileOf(live.token, username)).toMatchObject({ id: inLive.userId, full_name: 'Live' });
  });

  it('keep their id through a rename, which frees the old username for someone else', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const oldName = `old_${tag()}`;
    const newName = `new_${tag()}`;
    const user = await member(key, oldName);
    const fan = await member(key, `fan_${tag()}`);
    const buzz = await publish(user, 'before the rename');
    expect((await asUser(fan.token, 'PUT', `/v1/me/following/${oldName}`)).statusCode).toBe(200);
    const pk = await ctx.container.pool.oneFirst(
      sql.unsafe`select pk from profiles where user_id = ${user.userId} and mode = 'test'`,
    );

    const renamed = await asUser(user.token, 'PUT', '/v1/me/profile', { username: newName });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json()).toMatchObject({ id: user.userId, username: newName, followers: 1, buzzes: 1 });
    expectError(await read(key, `/v1/profiles/${oldName}`), 404);
    expect(await profileOf(key, newName)).toMatchObject({ id: user.userId, followers: 1, buzzes: 1 });
    expect(await buzzOf(key, buzz.id)).toMatchObject({ author_id: user.userId, author_username: newName });
    expect(
      await ctx.container.pool.oneFirst(
        sql.unsafe`select pk from profiles where user_id = ${user.userId} and mode = 'test'`,
      ),
    ).toBe(pk);

    const taker = await member(key, oldName);
    expect(await profileOf(key, oldName)).toMatchObject({ id: taker.userId, followers: 0, buzzes: 0 });
    expect((await read(key, `/v1/buzzes?author=${oldName}`)).json()).toEqual({
      items: [],
      next_cursor: null,
    });
  });

  it('are verified by the app’s server only', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const user = await member(key, `Star_${tag()}`);
    const bySelf = await asUser(user.token, 'PUT', '/v1/me/profile', {
      username: user.username,
      verified: true,
    });
    expect(bySelf.statusCode).toBe(422);
    expect(bySelf.json().error.fields).toEqual([
      { in: 'body', field: 'verified', message: 'is not a known field' },
    ]);
    expect((await asUser(user.token, 'GET', '/v1/me/profile')).json().verified).toBe(false);
    const userOnServerRoute = await asUser(user.token, 'PATCH', `/v1/profiles/${user.username}`, {
      verified: true,
    });
    expect(userOnServerRoute.statusCode).toBe(401);

    const patched = await callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/${user.username.toUpperCase()}`, {
      verified: true,
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ id: user.userId, username: user.username, verified: true });
    expect((await profileOf(key, user.username)).verified).toBe(true);
    // The user's own replacement keeps it; another name needs verifying again.
    const replaced = await asUser(user.token, 'PUT', '/v1/me/profile', { username: user.username });
    expect(replaced.json().verified).toBe(true);
    const renamed = `${user.username}_2`.slice(0, 30);
    expect((await asUser(user.token, 'PUT', '/v1/me/profile', { username: renamed })).json().verified).toBe(
      false,
    );
    expect((await profileOf(key, renamed)).verified).toBe(false);
    await asUser(user.token, 'PUT', '/v1/me/profile', { username: user.username });
    await callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/${user.username}`, { verified: true });

    const unset = await callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/${user.username}`, {
      verified: false,
    });
    expect(unset.json().verified).toBe(false);
    expectError(
      await callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/nobody_${tag()}`, { verified: true }),
      404,
    );
    expectInvalid(
      await callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/${user.username}`, { verified: 'yes' }),
      'body',
      'verified',
    );
    expectInvalid(
      await callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/${user.username}`, {
        verified: true,
        username: 'x',
      }),
      'body',
      'username',
    );
  });
});

describe('buzzes', () => {
  it('need a profile; are published with their author and read back', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const noProfile = await mintToken(key, `np-${tag()}`);
    expectError(await asUser(noProfile, 'POST', '/v1/me/buzzes', { text: 'hello' }), 409, 'PROFILE_REQUIRED');

    const author = await member(key, `author_${tag()}`);
    ctx.clock.advance(1);
    const at = ctx.clock.now().toISOString();
    const published = await asUser(author.token, 'POST', '/v1/me/buzzes', { text: 'Hello,\nworld' });
    expect(published.statusCode, published.body).toBe(200);
    const buzz = published.json<Buzz>();
    expect(buzz).toEqual({
      id: expect.stringMatching(/^bz_/),
      type: 'text',
      text: 'Hello,\nworld',
      reactions: 0,
      comments: 0,
      created_at: at,
      author_id: author.userId,
      author_username: author.username,
    });
    expect(await buzzOf(key, buzz.id)).toEqual(buzz);
    expect((await profileOf(key, author.username)).buzzes).toBe(1);

    const longest = await asUser(author.token, 'POST', '/v1/me/buzzes', {
      type: 'text',
      text: 'b'.repeat(2_000),
    });
    expect(longest.statusCode, longest.body).toBe(200);
    for (const body of [
      { text: '' },
      { text: '  \n ' },
      { text: 'a'.repeat(2_001) },
      { text: 'bell \u0007' },
      { text: 'x', type: 'image' },
      { text: 'x', reactions: 5 },
      {},
    ]) {
      const refused = await asUser(author.token, 'POST', '/v1/me/buzzes', body);
      expect(refused.statusCode, JSON.stringify(body)).toBe(422);
    }
    expect((await profileOf(key, author.username)).buzzes).toBe(2);
    expectError(await read(key, `/v1/buzzes/bz_${tag()}`), 404);
  });

  it('are listed 1 to 100 at a time', async () => {
    const { token: key } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: FUNDS });
    const author = await member(key, `lister_${tag()}`);
    const published = [];
    for (let i = 0; i < 3; i += 1) published.push(await publish(author, `buzz ${i}`));
    const all = await read(key, '/v1/buzzes?limit=100');
    expect(all.statusCode, all.body).toBe(200);
    expect(all.json()).toEqual({ items: published.reverse(), next_cursor: null });
    expect(idsOf((await read(key, '/v1/buzzes')).json())).toEqual(published.map((b) => b.id));
    expectInvalid(await read(key, '/v1/buzzes?limit=101'), 'query', 'limit');
    expectInvalid(await read(key, '/v1/buzzes?limit=0'), 'query', 'limit');
    expectInvalid(await read(key, '/v1/buzzes?limit=-1'), 'query', 'limit');
    expectInvalid(await read(key, '/v1/buzzes?limit=ten'), 'query', 'limit');
    expectInvalid(await read(key, '/v1/buzzes?colour=red'), 'query', 'colour');
    expect((await read(key, `/v1/buzzes?author=nobody_${tag()}`)).json()).toEqual({
      items: [],
      next_cursor: null,
    });
  });

  it('page by cursor: every buzz exactly once, newest first, while new ones are published', async () => {
    const { token: key } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: FUNDS });
    const authors = [await member(key, `pager_a_${tag()}`), await member(key, `pager_b_${tag()}`)];
    const published: Buzz[] = [];
    for (let i = 0; i < 25; i += 1) published.push(await publish(authors[i % 2]!, `buzz number ${i}`));
    const expected = published.map((buzz) => buzz.id).reverse();

    const seen: string[] = [];
    const sizes: number[] = [];
    const meanwhile: Buzz[] = [];
    let cursor: string | null = null;
    do {
      const page = await read(key, `/v1/buzzes?limit=5${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.statusCode, page.body).toBe(200);
      const body = page.json<Page<Buzz>>();
      seen.push(...idsOf(body));
      sizes.push(body.items.length);
      cursor = body.next_cursor;
      // Newer than any cursor handed out: it never shows on a later page.
      meanwhile.push(await publish(authors[sizes.length % 2]!, `published meanwhile ${sizes.length}`));
    } while (cursor !== null && sizes.length < 20);
    expect(sizes).toEqual([5, 5, 5, 5, 5]);
    expect(seen).toEqual(expected);

    const top = (await read(key, '/v1/buzzes?limit=5')).json<Page<Buzz>>();
    expect(idsOf(top)).toEqual(meanwhile.map((buzz) => buzz.id).reverse());

    // One author's, in any case of the username.
    const mine = await allPages<Buzz>(key, `/v1/buzzes?author=${authors[0]!.username.toUpperCase()}`, 4);
    const theirs = [...published, ...meanwhile]
      .filter((buzz) => buzz.author_id === authors[0]!.userId)
      .map((buzz) => buzz.id)
      .reverse();
    expect(mine.items.map((buzz) => buzz.id)).toEqual(theirs);
    expect(mine.sizes.reduce((sum, size) => sum + size, 0)).toBe(theirs.length);
  });

  it('refuse a cursor that is not one', async () => {
    const { token: key } = await createCustomer(ctx.container);
    for (const cursor of [
      'garbage',
      '____',
      b64('yesterday|bz_x'),
      b64('2026-01-01T00:00:00.000Z'),
      b64('2026-01-01T00:00:00.000Z|'),
      'x'.repeat(201),
    ]) {
      expectInvalid(await read(key, `/v1/buzzes?cursor=${cursor}`), 'query', 'cursor');
    }
    expectInvalid(await read(key, '/v1/buzzes?cursor='), 'query', 'cursor');
  });

  it('refuse a tampered cursor as one this API did not give out', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const first = (await read(key, '/v1/buzzes?limit=2')).json<Page<Buzz>>();
    expect(first.next_cursor).not.toBeNull();
    expect((await read(key, `/v1/buzzes?limit=2&cursor=${first.next_cursor}`)).statusCode).toBe(200);
    const [payload = '', signature = ''] = first.next_cursor!.split('.');
    const [at] = Buffer.from(payload, 'base64url').toString().split('|');
    // Forged positions: a time PostgreSQL cannot hold, an id with a NUL, an id never given out, and
    // the cursor given out with its position edited.
    const forged = {
      'out of range': b64('-271821-04-20T00:00:00.000Z|bz_x'),
      'NUL in the id': b64(`${at}|bz_\u0000x`),
      'made-up id': b64(`${at}|bz_forged`),
      edited: `${b64(`${at}|bz_forged`)}.${signature}`,
    };
    const statuses: Record<string, number> = {};
    for (const [name, cursor] of Object.entries(forged)) {
      statuses[name] = (await read(key, `/v1/buzzes?cursor=${cursor}`)).statusCode;
    }
    expect(statuses).toEqual({ 'out of range': 422, 'NUL in the id': 422, 'made-up id': 422, edited: 422 });
  });

  it('are deleted by their author only, softly: gone from list, read, count and search; the row stays', async () => {
    const { token: key, app } = await createCustomer(ctx.container);
    const author = await member(key, `del_${tag()}`);
    const other = await member(key, `other_${tag()}`);
    const word = `zq${tag()}`;
    const kept = await publish(author, `kept ${word}`);
    const buzz = await publish(author, `to be deleted ${word}`);
    const search = async () =>
      (await read(key, `/v1/search?q=${word}&type=buzzes`)).json().buzzes.map((b: Buzz) => b.id);
    expect(await search()).toEqual([buzz.id, kept.id]);
    expect((await profileOf(key, author.username)).buzzes).toBe(2);

    expectError(await asUser(other.token, 'DELETE', `/v1/me/buzzes/${buzz.id}`), 404);
    expect(await buzzOf(key, buzz.id)).toEqual(buzz);
    expectError(await asUser(author.token, 'DELETE', `/v1/buzzes/${buzz.id}`), 401);

    ctx.clock.advance(1_000);
    const deletedAt = ctx.clock.now();
    const deleted = await asUser(author.token, 'DELETE', `/v1/me/buzzes/${buzz.id}`);
    expect(deleted.statusCode, deleted.body).toBe(200);
    expect(deleted.json()).toEqual({ ok: true, id: buzz.id });

    expectError(await read(key, `/v1/buzzes/${buzz.id}`), 404);
    expect(idsOf((await read(key, `/v1/buzzes?author=${author.username}`)).json())).toEqual([kept.id]);
    expect(idsOf((await read(key, '/v1/buzzes?limit=5')).json())).not.toContain(buzz.id);
    expect((await profileOf(key, author.username)).buzzes).toBe(1);
    expect(await search()).toEqual([kept.id]);
    const row = await ctx.container.pool.one(
      sql.unsafe`select app_id, text, deleted_at from buzzes where id = ${buzz.id}`,
    );
    expect(row).toEqual({ app_id: app.id, text: buzz.text, deleted_at: deletedAt });

    expectError(await asUser(author.token, 'DELETE', `/v1/me/buzzes/${buzz.id}`), 404);
    expectError(await callWithKey(ctx.app, key, 'DELETE', `/v1/buzzes/${buzz.id}`), 404);
    expectError(await asUser(other.token, 'PUT', `/v1/me/buzzes/${buzz.id}/reaction`, { kind: 'like' }), 404);
    expectError(await asUser(other.token, 'POST', `/v1/me/buzzes/${buzz.id}/comments`, { text: 'hi' }), 404);
    expectError(await read(key, `/v1/buzzes/${buzz.id}/comments`), 404);
    expect((await profileOf(key, author.username)).buzzes).toBe(1);
  });

  it('are removed by the app’s server, whoever wrote them', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const author = await member(key, `mod_${tag()}`);
    const word = `zm${tag()}`;
    const buzz = await publish(author, `moderate me ${word}`);
    const removed = await callWithKey(ctx.app, key, 'DELETE', `/v1/buzzes/${buzz.id}`);
    expect(removed.statusCode, removed.body).toBe(200);
    expect(removed.json()).toEqual({ ok: true, id: buzz.id });
    expectError(await read(key, `/v1/buzzes/${buzz.id}`), 404);
    expect((await read(key, `/v1/buzzes?author=${author.username}`)).json()).toEqual({
      items: [],
      next_cursor: null,
    });
    expect((await profileOf(key, author.username)).buzzes).toBe(0);
    expect((await read(key, `/v1/search?q=${word}&type=buzzes`)).json().buzzes).toEqual([]);
    expect(
      await ctx.container.pool.oneFirst(
        sql.unsafe`select deleted_at is not null from buzzes where id = ${buzz.id}`,
      ),
    ).toBe(true);
    expectError(await asUser(author.token, 'DELETE', `/v1/me/buzzes/${buzz.id}`), 404);
    expectError(await callWithKey(ctx.app, key, 'DELETE', `/v1/buzzes/${buzz.id}`), 404);
  });
});

describe('reactions', () => {
  it('are one per user: another kind replaces it, a delete removes it, removing none is a 404', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const [author, fan, other] = await Promise.all(
      ['author', 'fan', 'other'].map((name) => member(key, `${name}_${tag()}`)),
    );
    const buzz = await publish(author!, 'react to me');
    const url = `/v1/me/buzzes/${buzz.id}/reaction`;
    const react = (user: Member, body: object) => asUser(user.token, 'PUT', url, body);

    expect((await react(fan!, { kind: 'love' })).json()).toEqual({
      buzz_id: buzz.id,
      kind: 'love',
      reactions: 1,
    });
    expect((await react(fan!, { kind: 'wow' })).json()).toEqual({
      buzz_id: buzz.id,
      kind: 'wow',
      reactions: 1,
    });
    expect((await react(fan!, { kind: 'wow' })).json()).toEqual({
      buzz_id: buzz.id,
      kind: 'wow',
      reactions: 1,
    });
    expect((await react(other!, {})).json()).toEqual({ buzz_id: buzz.id, kind: 'like', reactions: 2 });
    expect((await buzzOf(key, buzz.id)).reactions).toBe(2);
    const kinds = await ctx.container.pool.any(sql.unsafe`
      select p.user_id, r.kind from buzz_reactions r join profiles p on p.pk = r.profile_pk
      join buzzes b on b.pk = r.buzz_pk where b.id = ${buzz.id} order by r.kind`);
    expect(kinds).toEqual([
      { user_id: other!.userId, kind: 'like' },
      { user_id: fan!.userId, kind: 'wow' },
    ]);
    expectInvalid(await react(fan!, { kind: 'meh' }), 'body', 'kind');
    expectInvalid(await react(fan!, { kind: 'like', extra: 1 }), 'body', 'extra');

    const removed = await asUser(fan!.token, 'DELETE', url);
    expect(removed.statusCode, removed.body).toBe(200);
    expect(removed.json()).toEqual({ ok: true, id: buzz.id });
    expect((await buzzOf(key, buzz.id)).reactions).toBe(1);
    expectError(await asUser(fan!.token, 'DELETE', url), 404);
    expectError(await asUser(author!.token, 'DELETE', url), 404);
    expect((await buzzOf(key, buzz.id)).reactions).toBe(1);

    expectError(await asUser(fan!.token, 'PUT', `/v1/me/buzzes/bz_${tag()}/reaction`, { kind: 'like' }), 404);
    const noProfile = await mintToken(key, `np-${tag()}`);
    expectError(await asUser(noProfile, 'PUT', url, { kind: 'like' }), 409, 'PROFILE_REQUIRED');
    // Nothing of theirs to remove: a 404, as for any reaction that is not the caller's.
    expect((await asUser(noProfile, 'DELETE', url)).statusCode).toBe(404);
    expect((await buzzOf(key, buzz.id)).reactions).toBe(1);
  });
});

describe('comments', () => {
  it('are added and listed newest first, a page at a time', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const [author, first, second] = await Promise.all(
      ['author', 'first', 'second'].map((name) => member(key, `${name}_${tag()}`)),
    );
    const buzz = await publish(author!, 'comment on me');
    const url = `/v1/me/buzzes/${buzz.id}/comments`;
    const comments = [];
    for (let i = 0; i < 7; i += 1) {
      ctx.clock.advance(1);
      const writer = i % 2 === 0 ? first! : second!;
      const comment = await asUser(writer.token, 'POST', url, { text: `comment ${i}` });
      expect(comment.statusCode, comment.body).toBe(200);
      expect(comment.json()).toEqual({
        id: expect.stringMatching(/^cmt_/),
        buzz_id: buzz.id,
        text: `comment ${i}`,
        created_at: ctx.clock.now().toISOString(),
        author_id: writer.userId,
        author_username: writer.username,
      });
      comments.push(comment.json());
    }
    expect((await buzzOf(key, buzz.id)).comments).toBe(7);
    const listed = await allPages(key, `/v1/buzzes/${buzz.id}/comments`, 3);
    expect(listed.sizes).toEqual([3, 3, 1]);
    expect(listed.items).toEqual(comments.reverse());

    expectInvalid(await read(key, `/v1/buzzes/${buzz.id}/comments?limit=101`), 'query', 'limit');
    expectInvalid(await read(key, `/v1/buzzes/${buzz.id}/comments?cursor=garbage`), 'query', 'cursor');
    expectInvalid(await asUser(first!.token, 'POST', url, { text: '' }), 'body', 'text');
    expectInvalid(await asUser(first!.token, 'POST', url, { text: 'c'.repeat(1_001) }), 'body', 'text');
    expect((await asUser(first!.token, 'POST', url, { text: 'c'.repeat(1_000) })).statusCode).toBe(200);
    expect((await buzzOf(key, buzz.id)).comments).toBe(8);

    expectError(await read(key, `/v1/buzzes/bz_${tag()}/comments`), 404);
    expectError(
      await asUser(first!.token, 'POST', `/v1/me/buzzes/bz_${tag()}/comments`, { text: 'hi' }),
      404,
    );
    const noProfile = await mintToken(key, `np-${tag()}`);
    expectError(await asUser(noProfile, 'POST', url, { text: 'hi' }), 409, 'PROFILE_REQUIRED');
    expect((await buzzOf(key, buzz.id)).comments).toBe(8);
  });
});

describe('follows', () => {
  it('count followers and following exactly; self-follow is a 422; unfollowing twice is a 404', async () => {
    const { token: key } = await createCustomer(ctx.container);
    const [a, b, c] = await Promise.all(
      ['a', 'b', 'c'].map((name) => member(key, `Follow_${name}_${tag()}`)),
    );
    const follow = (user: Member, username: string) =>
      asUser(user.token, 'PUT', `/v1/me/following/${username}`);
    const counts = async (user: Member) => {
      const { followers, following } = await profileOf(key, user.username);
      return { followers, following };
    };

    const followed = await follow(a!, b!.username.toLowerCase());
    expect(followed.statusCode, followed.body).toBe(200);
    expect(followed.json()).toEqual({ username: b!.username, following: true, followers: 1 });
    expect((await follow(a!, b!.username)).json()).toEqual({
      username: b!.username,
      following: true,
      followers: 1,
    });
    expect((await follow(c!, b!.username)).json()).toEqual({
      username: b!.username,
      following: true,
      followers: 2,
    });
    expect((await follow(a!, c!.username)).json()).toEqual({
      username: c!.username,
      following: true,
      followers: 1,
    });
    expect(await counts(a!)).toEqual({ followers: 0, following: 2 });
    expect(await counts(b!)).toEqual({ followers: 2, following: 0 });
    expect(await counts(c!)).toEqual({ followers: 1, following: 1 });

    expectInvalid(await follow(a!, a!.username), 'path', 'username');
    expectInvalid(await follow(a!, a!.username.toUpperCase()), 'path', 'username');
    expectInvalid(await follow(a!, 'x'), 'path', 'username');
    expectError(await follow(a!, `nobody_${tag()}`), 404);
    const noProfile = await mintToken(key, `np-${tag()}`);
    expectError(await asUser(noProfile, 'PUT', `/v1/me/following/${b!.username}`), 409, 'PROFILE_REQUIRED');
    expect(await counts(a!)).toEqual({ followers: 0, following: 2 });

    const unfollowed = await asUser(a!.token, 'DELETE', `/v1/me/following/${b!.username}`);
    expect(unfollowed.statusCode, unfollowed.body).toBe(200);
    expect(unfollowed.json()).toEqual({ ok: true, id: b!.username });
    expectError(await asUser(a!.token, 'DELETE', `/v1/me/following/${b!.username}`), 404);
    expectError(await asUser(b!.token, 'DELETE', `/v1/me/following/${a!.username}`), 404);
    expect(await counts(a!)).toEqual({ followers: 0, following: 1 });
    expect(await counts(b!)).toEqual({ followers: 1, following: 0 });
    expect(await counts(c!)).toEqual({ followers: 1, following: 1 });
  });
});

describe('counters under concurrency', () => {
  const CROWD = 200;
  /** Apps of their own: a pool that stalls here must not stall the other tests. */
  const contexts: TestContext[] = [];
  const ownContext = async () => {
    const started = await startTestApp();
    contexts.push(started);
    return started;
  };
  afterAll(async () => {
    await Promise.race([Promise.all(contexts.map((c) => c.close())), sleep(5_000)]);
  });

  /** 200 users of a fresh test app, each with a profile (the sandbox seeded first). */
  async function crowdOf(on: TestContext) {
    const { token: key, app } = await createCustomer(on.container);
    expect((await read(key, '/v1/buzzes?limit=1', on)).statusCode).toBe(200);
    const t = tag().slice(0, 6);
    const users = await settleWithin(
      Array.from({ length: CROWD }, (_, i) => member(key, `crowd_${t}_${i}`, {}, on, `crowd-${t}-${i}`)),
      60_000,
    );
    return { key, app, users };
  }

  type Outcome = { what: string; user: number; target: number; status: number };
  const statusesOf = (outcomes: Outcome[], what: string) =>
    [...new Set(outcomes.filter((o) => o.what === what).map((o) => o.status))].sort();
  const succeeded = (outcomes: Outcome[], what: string, target: number) =>
    outcomes.filter((o) => o.what === what && o.target === target && o.status === 200);

  it('of reactions, comments and buzzes equal a recount after 200 users write at once', async () => {
    const on = await ownContext();
    const { key, app, users } = await crowdOf(on);
    const buzzes = await Promise.all(users.slice(0, 3).map((user, i) => publish(user, `star buzz ${i}`, on)));

    // Each user's calls all start together, its undoes racing its dos.
    const calls: Promise<Outcome>[] = [];
    const call = (what: string, user: number, target: number, reply: Promise<Reply>) =>
      calls.push(reply.then((r) => ({ what, user, target, status: r.statusCode })));
    users.forEach((user, i) => {
      const as = (method: Method, url: string, payload?: object) =>
        asUser(user.token, method, url, payload, on);
      buzzes.forEach((buzz, j) => {
        const kind = REACTION_KINDS[(i + j) % REACTION_KINDS.length];
        call('react', i, j, as('PUT', `/v1/me/buzzes/${buzz.id}/reaction`, { kind }));
      });
      if (i % 3 === 0)
        call('react', i, 1, as('PUT', `/v1/me/buzzes/${buzzes[1]!.id}/reaction`, { kind: 'sad' }));
      if (i % 4 === 0) call('unreact', i, 0, as('DELETE', `/v1/me/buzzes/${buzzes[0]!.id}/reaction`));
      const j = i % buzzes.length;
      call('comment', i, j, as('POST', `/v1/me/buzzes/${buzzes[j]!.id}/comments`, { text: `from ${i}` }));
      if (i % 7 === 0)
        call('comment', i, 2, as('POST', `/v1/me/buzzes/${buzzes[2]!.id}/comments`, { text: 'again' }));
      if (i % 10 === 0) call('publish', i, -1, as('POST', '/v1/me/buzzes', { text: `crowd buzz ${i}` }));
      if (i % 20 === 0) {
        call(
          'publish and delete',
          i,
          -1,
          as('POST', '/v1/me/buzzes', { text: `short-lived ${i}` }).then((r) =>
            as('DELETE', `/v1/me/buzzes/${r.json().id}`),
          ),
        );
      }
    });
    const outcomes = await settleWithin(calls, 30_000);

    expect(statusesOf(outcomes, 'react')).toEqual([200]);
    expect(statusesOf(outcomes, 'comment')).toEqual([200]);
    expect(statusesOf(outcomes, 'publish')).toEqual([200]);
    expect(statusesOf(outcomes, 'publish and delete')).toEqual([200]);
    for (const status of statusesOf(outcomes, 'unreact')) expect([200, 404]).toContain(status);

    // An undo that found nothing (404) ran before its do.
    for (const [j, buzz] of buzzes.entries()) {
      const { reactions, comments } = await buzzOf(key, buzz.id, on);
      expect({ j, reactions, comments }).toEqual({
        j,
        reactions: CROWD - (j === 0 ? succeeded(outcomes, 'unreact', 0).length : 0),
        comments: outcomes.filter((o) => o.what === 'comment' && o.target === j).length,
      });
    }
    for (const i of [0, 1, 2, 3, 10, 20, 199]) {
      const { buzzes: published } = await profileOf(key, users[i]!.username, on);
      expect({ i, published }).toEqual({ i, published: (i < 3 ? 1 : 0) + (i % 10 === 0 ? 1 : 0) });
    }

    const recount = await miscounted(app.id, 'test');
    expect(recount.profiles).toBeGreaterThanOrEqual(CROWD);
    expect(recount.wrongProfiles).toEqual([]);
    expect(recount.wrongBuzzes).toEqual([]);
  }, 180_000);

  it('of follows equal a recount after 200 users follow and unfollow at once', async () => {
    const on = await ownContext();
    const { key, app, users } = await crowdOf(on);
    const stars = users.slice(0, 5);

    // Everyone follows the five stars (the stars each other too), some unfollow one at once.
    const calls: Promise<Outcome>[] = [];
    const call = (what: string, user: number, target: number, reply: Promise<Reply>) =>
      calls.push(reply.then((r) => ({ what, user, target, status: r.statusCode })));
    users.forEach((user, i) => {
      stars.forEach((star, s) => {
        if (s !== i)
          call('follow', i, s, asUser(user.token, 'PUT', `/v1/me/following/${star.username}`, undefined, on));
      });
      if (i % 5 === 0 && i !== 1) {
        call(
          'unfollow',
          i,
          1,
          asUser(user.token, 'DELETE', `/v1/me/following/${stars[1]!.username}`, undefined, on),
        );
      }
    });
    const outcomes = await settleWithin(calls, 30_000);

    expect(statusesOf(outcomes, 'follow')).toEqual([200]);
    for (const status of statusesOf(outcomes, 'unfollow')) expect([200, 404]).toContain(status);
    const unfollowers = new Set(succeeded(outcomes, 'unfollow', 1).map((o) => o.user));
    for (const [s, star] of stars.entries()) {
      const { followers } = await profileOf(key, star.username, on);
      expect({ s, followers }).toEqual({ s, followers: CROWD - 1 - (s === 1 ? unfollowers.size : 0) });
    }
    for (const i of [0, 1, 4, 5, 10, 11, 199]) {
      const { following } = await profileOf(key, users[i]!.username, on);
      const expected = stars.filter((_, s) => s !== i).length - (unfollowers.has(i) ? 1 : 0);
      expect({ i, following }).toEqual({ i, following: expected });
    }

    const recount = await miscounted(app.id, 'test');
    expect(recount.wrongProfiles).toEqual([]);
    expect(recount.wrongBuzzes).toEqual([]);
  }, 180_000);
});

describe('search', () => {
  /** A live app: no sandbox, so every match is this test's. */
  let key: string;
  let appId: string;
  let viewer: Member;
  let fans: Member[];
  let names: { exact: string; a: string; b: string };

  beforeAll(async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: FUNDS });
    key = customer.token;
    appId = customer.app.id;
    const t = tag();
    names = { exact: `Quillon${t}`, a: `quillon${t}_aa`, b: `quillon${t}_bb` };
    await member(key, `zephyrine_quartz_${t.slice(0, 4)}`, { full_name: 'Zéphyrine Quartz' });
    await member(key, names.a);
    await member(key, names.b);
    await member(key, names.exact);
    viewer = await member(key, `viewer_${t}`);
    fans = [await member(key, `fan_one_${t}`), await member(key, `fan_two_${t}`)];
  });

  const profilesFor = async (q: string, as?: Member) => {
    const found = as
      ? await asUser(as.token, 'GET', `/v1/me/search?q=${encodeURIComponent(q)}&type=profiles`)
      : await read(key, `/v1/search?q=${encodeURIComponent(q)}&type=profiles`);
    expect(found.statusCode, found.body).toBe(200);
    return found.json().profiles.map((p: { username: string }) => p.username);
  };

  it('finds profiles by username and full name, with typos, prefixes and accents', async () => {
    const queries = ['zephyrine', 'ZEPHYRINNE', 'zephyr', 'Zéphy', 'quartz', 'quarts'];
    for (const q of queries) {
      const found = await profilesFor(q, viewer);
      expect(found, q).toHaveLength(1);
      expect(found[0], q).toMatch(/^zephyrine_quartz_/);
    }
    expect(await profilesFor('xyzzy', viewer)).toEqual([]);

    // The same as the app's server, and as a user who has no profile yet.
    const stranger = await mintToken(key, `stranger-${tag()}`);
    const statuses = {
      server: (await read(key, '/v1/search?q=zephyrine')).statusCode,
      'user without a profile': (await asUser(stranger, 'GET', '/v1/me/search?q=zephyrine')).statusCode,
    };
    expect(statuses).toEqual({ server: 200, 'user without a profile': 200 });
    for (const q of queries) expect(await profilesFor(q), q).toHaveLength(1);
    expect(await profilesFor('xyzzy')).toEqual([]);
    const one = (await read(key, '/v1/search?q=zephyrine')).json();
    expect(one).toEqual({
      query: 'zephyrine',
      profiles: [
        {
          id: expect.any(String),
          username: expect.stringMatching(/^zephyrine_quartz_/),
          full_name: 'Zéphyrine Quartz',
          verified: false,
          followers: 0,
        },
      ],
      buzzes: [],
    });
  });

  it('ranks the exact username first, then verified, then (for the user) followed, then the most followed', async () => {
    expect((await profilesFor(names.exact.toUpperCase()))[0]).toBe(names.exact);
    // b has two followers, a one: the viewer's.
    for (const fan of fans)
      expect((await asUser(fan.token, 'PUT', `/v1/me/following/${names.b}`)).statusCode).toBe(200);
    expect((await asUser(viewer.token, 'PUT', `/v1/me/following/${names.a}`)).statusCode).toBe(200);
    const q = names.exact.toLowerCase();
    expect(await profilesFor(q, viewer)).toEqual([names.exact, names.a, names.b]);
    expect(await profilesFor(q, fans[0])).toEqual([names.exact, names.b, names.a]);
    // The app's server follows no one: the most followed first.
    expect(await profilesFor(q)).toEqual([names.exact, names.b, names.a]);

    const verified = await callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/${names.a}`, { verified: true });
    expect(verified.statusCode).toBe(200);
    expect(await profilesFor(q, fans[0])).toEqual([names.exact, names.a, names.b]);
    expect(await profilesFor(q)).toEqual([names.exact, names.a, names.b]);
  });

  it('ranks a verified profile ahead of more equally close names than search takes nearest', async () => {
    // More profiles holding the word itself than the nearest names search ranks, and a verified one
    // holding it with one letter more: as close once rounded, so it ranks first, but further than
    // all of the others, so the nearest names alone leave it out.
    const word = `Xanthoporphyrin${tag().slice(0, 7)}`.toLowerCase();
    const t = tag().slice(0, 6);
    for (let n = 0; n < SEARCH_PROFILE_NEAREST + 5; n++)
      await member(key, `xan_${t}_${n}`, { full_name: word });
    const verified = await member(key, `xan_${t}_verified`, { full_name: `${word}s` });
    const marked = await callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/${verified.username}`, {
      verified: true,
    });
    expect(marked.statusCode, marked.body).toBe(200);

    const found = await profilesFor(word);
    expect(found[0]).toBe(verified.username);
    expect(found).toHaveLength(DEFAULT_SEARCH_PER_GROUP);
  });

  it('finds names by the start of a word, the word itself first, without walking the nearest', async () => {
    // More names holding a longer word than search ranks, and two holding the word itself.
    const word = `Vantablack${tag().slice(0, 6)}`.toLowerCase();
    const t = tag().slice(0, 6);
    for (let n = 0; n < SEARCH_PROFILE_NEAREST + 5; n++)
      await member(key, `vb_${t}_${n}`, { full_name: `Dr ${word}ian` });
    const exact = [
      await member(key, `vb_${t}_x1`, { full_name: word }),
      await member(key, `vb_${t}_x2`, { full_name: `A ${word}` }),
    ];

    const found = await profilesFor(word);
    expect(found).toHaveLength(DEFAULT_SEARCH_PER_GROUP);
    expect(found.slice(0, 2).sort()).toEqual(exact.map((m) => m.username).sort());
    expect(found.slice(2)).toEqual(
      expect.arrayContaining([expect.stringMatching(new RegExp(`^vb_${t}_\\d+$`))]),
    );
    // As typed: every name holding a word that starts with it, and nothing walked.
    for (const typed of [word.slice(0, 4), word.slice(0, 8), `${word}i`, `@${word.slice(0, 8)} `]) {
      expect(await profilesFor(typed), typed).toHaveLength(DEFAULT_SEARCH_PER_GROUP);
      const run = await searchStore(explaining(ctx.container.searchPool, true)).searchProfiles(
        { appId, mode: 'live' },
        typed,
        DEFAULT_SEARCH_PER_GROUP,
      );
      expect(namesSearched(run), typed).toBe(0);
    }
  });

  /** Which of `terms` the app's live vocabulary holds, sorted. */
  const vocabulary = (terms: string[]) =>
    ctx.container.pool.anyFirst(sql.unsafe`
      select term from profile_vocabulary
      where app_id = ${appId} and mode = 'live' and term = any(${sql.array(terms, 'text')}) order by 1`);
  const sorted = (words: string[]) => [...words].sort();
  /**
   * Sweeps the vocabulary to the end: other tests' profile writes, running meanwhile, may hold the
   * sweep off for a turn.
   */
  const sweepVocabulary = async () => {
    for (let turn = 0; turn < 20; turn++) if (!(await ctx.container.social.pruneVocabulary()).putOff) return;
    throw new Error('the vocabulary sweep was put off 20 times');
  };

  it('keeps the words of a name, its pairs of neighbouring words and its terms with the name', async () => {
    const renamed = await member(key, `renamed_${tag().slice(0, 6)}`, { full_name: 'Óscar Ñandú' });
    const [, t] = renamed.username.split('_') as [string, string];
    const of = (table: 'profile_words' | 'profile_word_pairs', column: 'word' | 'pair') =>
      ctx.container.pool.anyFirst(sql.unsafe`
        select w.${sql.identifier([column])} from ${sql.identifier([table])} w
        join profiles p on p.pk = w.profile_pk
        where p.app_id = ${appId} and p.user_id = ${renamed.userId} order by 1`);
    const terms = async () => ({
      words: await of('profile_words', 'word'),
      pairs: await of('profile_word_pairs', 'pair'),
    });
    expect(await terms()).toEqual({
      words: sorted(['nandu', 'oscar', 'renamed', t]),
      pairs: sorted([`renamed ${t}`, 'oscar nandu']),
    });
    const rename = async (username: string, fullName: string) => {
      const put = await asUser(renamed.token, 'PUT', '/v1/me/profile', { username, full_name: fullName });
      expect(put.statusCode, put.body).toBe(200);
    };
    await rename(renamed.username, 'Óscar Wilde-Smith');
    expect(await terms()).toEqual({
      words: sorted(['oscar', 'smith', 'wilde', 'renamed', t]),
      pairs: sorted([`renamed ${t}`, 'oscar wilde', 'wilde smith']),
    });
    await rename(`${renamed.username}_2`, 'Óscar Wilde-Smith');
    expect(await terms()).toEqual({
      words: sorted(['2', 'oscar', 'smith', 'wilde', 'renamed', t]),
      pairs: sorted([`renamed ${t}`, `${t} 2`, 'oscar wilde', 'wilde smith']),
    });
    // The terms the name let go leave the app's with the sweep, which keeps those it holds.
    const held = [`renamed ${t}`, `${t} 2`, 'oscar wilde', 'wilde smith'];
    await sweepVocabulary();
    expect(await vocabulary([...held, 'nandu', 'oscar nandu'])).toEqual(sorted(held));
    expect(await profilesFor('oscarnandu')).toEqual([]);
  });

  it('sweeps the terms no name holds out of the vocabulary, never one a name is taking', async () => {
    const t = tag();
    const [first, second, third] = [`zebulon${t}`, `quimby${t}`, `ortolan${t}`];
    const named = await member(key, `sweep_${t}`, { full_name: `${first} ${second} ${third}` });
    const others = [await member(key, `sweep_${t}_one`), await member(key, `sweep_${t}_two`)];
    // The name lets go of its second and third words and of its pairs; it keeps the first.
    const put = await asUser(named.token, 'PUT', '/v1/me/profile', {
      username: named.username,
      full_name: first,
    });
    expect(put.statusCode, put.body).toBe(200);
    const words = [first, second, third];
    const terms = [...words, `${first} ${second}`, `${second} ${third}`];
    /** Another name takes `word` in a transaction left open until `commit`. */
    const takingOpen = async (other: Member, word: string) => {
      let commit = () => {};
      const committing = new Promise<void>((resolve) => {
        commit = resolve;
      });
      let taking = () => {};
      const taken = new Promise<void>((resolve) => {
        taking = resolve;
      });
      const done = ctx.container.pool.transaction(async (tx) => {
        await tx.query(sql.unsafe`
          update profiles set full_name = ${word}
          where app_id = ${appId} and mode = 'live' and user_id = ${other.userId}`);
        taking();
        await committing;
      });
      await taken;
      return { commit, done };
    };
    // Open while the sweep runs: the sweep waits for it briefly, then puts its work off.
    const holding = await takingOpen(others[0]!, second);
    expect(await ctx.container.social.pruneVocabulary()).toEqual({ pruned: 0, putOff: true });
    holding.commit();
    await holding.done;
    // Committed while the sweep waits for it (or, on a slow machine, after it put its work off): the
    // sweep reads the names once the write is in, and keeps the word either way.
    const retaking = await takingOpen(others[1]!, third);
    const sweeping = ctx.container.social.pruneVocabulary();
    await new Promise((resolve) => setTimeout(resolve, 50));
    retaking.commit();
    await Promise.all([retaking.done, sweeping]);
    expect(await vocabulary(words)).toEqual(sorted(words));
    // Then it deletes the pairs, which no name holds, keeps the words, and forgets all of them.
    await sweepVocabulary();
    expect(await vocabulary(terms)).toEqual(sorted(words));
    expect(
      await ctx.container.pool.anyFirst(sql.unsafe`
        select term from profile_vocabulary_dropped
        where app_id = ${appId} and mode = 'live' and term = any(${sql.array(terms, 'text')})`),
    ).toEqual([]);
  });

  it('ranks each name once, however many of its words start with the query', async () => {
    // Names whose username and full name both start with the query hold two of the words found: 30 of
    // them and 30 names with a longer word, 60 names for a page of 50.
    const word = `Quokkaberry${tag().slice(0, 5)}`.toLowerCase();
    for (let n = 0; n < 30; n++) await member(key, `${word}${n}`, { full_name: word });
    const t = tag().slice(0, 6);
    for (let n = 0; n < 30; n++) await member(key, `qb_${t}_${n}`, { full_name: `${word}ian` });

    const found = await read(key, `/v1/search?q=${word}&type=profiles&limit=${MAX_SEARCH_PER_GROUP}`);
    expect(found.statusCode, found.body).toBe(200);
    const usernames: string[] = found.json().profiles.map((p: { username: string }) => p.username);
    expect(usernames).toHaveLength(MAX_SEARCH_PER_GROUP);
    expect(usernames.slice(0, 30).every((u) => u.startsWith(word))).toBe(true);
    expect(usernames.slice(30).every((u) => u.startsWith(`qb_${t}_`))).toBe(true);
  });

  it('finds the names holding the words nearest a typo, each name once, without searching the names', async () => {
    // 30 names holding the word and a longer one, both near the typo, and 30 holding a word further
    // from it: each of the first counts once, so 20 of the others make the page.
    const word = `Pterodactylus${tag().slice(0, 6)}`.toLowerCase();
    const t = tag().slice(0, 6);
    const [closest, further] = [[], []] as [string[], string[]];
    for (let n = 0; n < 30; n++) {
      closest.push((await member(key, `pt_${t}_a${n}`, { full_name: `${word} ${word}s` })).username);
      further.push((await member(key, `pt_${t}_b${n}`, { full_name: `${word}ss` })).username);
    }
    const typo = `${word.slice(0, 2)}${word[3]}${word[2]}${word.slice(4)}`;

    const found = await read(key, `/v1/search?q=${typo}&type=profiles&limit=${MAX_SEARCH_PER_GROUP}`);
    expect(found.statusCode, found.body).toBe(200);
    const usernames: string[] = found.json().profiles.map((p: { username: string }) => p.username);
    expect(usernames).toHaveLength(MAX_SEARCH_PER_GROUP);
    expect(usernames).toEqual(expect.arrayContaining(closest));
    expect(usernames.filter((u) => further.includes(u))).toHaveLength(MAX_SEARCH_PER_GROUP - closest.length);
    const run = await searchStore(explaining(ctx.container.searchPool, true)).searchProfiles(
      { appId, mode: 'live' },
      typo,
      MAX_SEARCH_PER_GROUP,
    );
    expect(namesSearched(run)).toBe(0);
  });

  it('finds a name by two of its words run together, in either order, with a typo', async () => {
    const t = tag().slice(0, 5).toLowerCase();
    const long = await member(key, `runs_${t}`, { full_name: `Gwendolyn Quasimodo${t}` });
    // Run together backwards, these are far from the words run together forwards ("joann…" 0.46 to
    // "annjo…"; "annemarie" 0.58 to "marianne"), as close as the name to the words apart.
    const short = await member(key, `runs_${t}_2`, { full_name: `Jo${t} Ann` });
    const overlapping = await member(key, `runs_${t}_3`, { full_name: 'Anne Marie' });
    const search = (q: string) =>
      searchStore(explaining(ctx.container.searchPool, true)).searchProfiles(
        { appId, mode: 'live' },
        q,
        DEFAULT_SEARCH_PER_GROUP,
      );
    const cases = {
      [`gwendolynquasimodo${t}`]: long.username,
      [`Quasimodo${t}Gwendolyn`]: long.username,
      [`gwendolynqausimodo${t}`]: long.username,
      [`annjo${t}`]: short.username,
      marianne: overlapping.username,
    };
    for (const [q, username] of Object.entries(cases)) {
      expect(await profilesFor(q), q).toEqual([username]);
      expect(namesSearched(await search(q)), q).toBe(0);
    }
    // Several words search the names.
    expect(await profilesFor(`gwendolyn quasimodo${t}`)).toEqual([long.username]);
    expect(namesSearched(await search(`gwendolyn quasimodo${t}`))).toBeGreaterThan(0);
  });

  it('finds the same profiles whether the matches are found first or the nearest names walked', async () => {
    // The planner picks per query, from how many names it expects to match (migration 0026): each
    // way forced here, on the profiles of the tests above, followers and verified mark included.
    const ways = {
      matches: [sql.unsafe`set local enable_indexscan = off`, sql.unsafe`set local enable_seqscan = off`],
      nearest: [
        sql.unsafe`set local enable_bitmapscan = off`,
        sql.unsafe`set local enable_seqscan = off`,
        sql.unsafe`set local enable_sort = off`,
      ],
    };
    // On search's own connections, where every call is planned for its values: elsewhere PostgreSQL
    // would settle on one plan for the statement, made under whichever way came first.
    const inWay = <T>(way: keyof typeof ways, run: (tx: Db) => Promise<T>) =>
      ctx.container.searchPool.transaction(async (tx) => {
        for (const setting of ways[way]) await tx.query(setting);
        return run(tx);
      });
    const search = (db: Db, q: string) => searchStore(db).searchProfiles({ appId, mode: 'live' }, q, 50);
    const found = (way: keyof typeof ways, q: string) =>
      inWay(way, async (tx) => (await search(tx, q)).map((p) => p.username));
    const queries = [
      names.exact.toLowerCase(),
      'quillon',
      'zephyrine',
      'ZEPHYRINNE',
      'quarts',
      'xyzzy',
      'zephyrine quartz',
      'quarts zephyr',
    ];
    for (const q of queries) expect(await found('nearest', q), q).toEqual(await found('matches', q));
    expect(await found('nearest', names.exact.toLowerCase())).toEqual([names.exact, names.a, names.b]);
    expect(await found('matches', 'zephyr')).toEqual([expect.stringMatching(/^zephyrine_quartz_/)]);
    // The two ways are two plans: only one walks the nearest names in the GiST index's order (the
    // statement spells the index's expression). Only a query of several words walks.
    const walks = (way: keyof typeof ways) =>
      inWay(way, async (tx) =>
        indexesRead(await search(explaining(tx), 'zephyrine quartz')).includes(
          'Index Scan profiles_search_nearest_idx',
        ),
      );
    expect(await walks('nearest')).toBe(true);
    expect(await walks('matches')).toBe(false);
  });

  it('reads the terms nearest a word only when no word starts with it, and only the words it starts', async () => {
    const reads = (q: string) =>
      indexReads(
        [
          'profile_words_pkey',
          'profile_vocabulary_pkey',
          'profile_vocabulary_words_idx',
          'profile_vocabulary_pairs_idx',
        ],
        (tx) => searchStore(tx).searchProfiles({ appId, mode: 'live' }, q, DEFAULT_SEARCH_PER_GROUP),
      );
    // One name of the app holds a word that starts with it ("zephyrine"): that word's entry, no term.
    const started = await reads('zephyr');
    expect(started.profile_words_pkey).toEqual({ scans: 1, entries: 1 });
    expect(started.profile_vocabulary_words_idx.scans + started.profile_vocabulary_pairs_idx.scans).toBe(0);
    // A typo that no word starts with: the words nearest it through their trigram index, then the
    // pairs (the words' holders are fewer than a page), never all the app's terms by their key.
    expect(await profilesFor('zephyrime')).toEqual([expect.stringMatching(/^zephyrine_quartz_/)]);
    const typo = await reads('zephyrime');
    expect(typo.profile_vocabulary_words_idx.scans).toBe(1);
    expect(typo.profile_vocabulary_pairs_idx.scans).toBe(1);
    expect(typo.profile_vocabulary_pkey.scans).toBe(0);
  });

  it('reads no name for a query without a letter or digit', async () => {
    // Such a query has no trigram, so it matches no name; the search indexes would read them all to
    // find that out.
    for (const q of ['-', '?! …', '..']) {
      expect(await profilesFor(q), q).toEqual([]);
      const run = await searchStore(explaining(ctx.container.searchPool, true)).searchProfiles(
        { appId, mode: 'live' },
        q,
        50,
      );
      expect(rowsSearched(run), q).toBe(0);
    }
    expect(await profilesFor('-zephyrine-')).toEqual([expect.stringMatching(/^zephyrine_quartz_/)]);
  });

  it('folds in the database’s collation, whatever the text’s own', async () => {
    // The names' words and terms are in "C" (migrations 0036, 0037): a fold that followed its
    // argument's collation would lowercase Greek there and not here, and their lookups would disagree.
    const text = 'ÉCOLE ΣΟΦΊΑ Дом';
    const folds = await ctx.container.pool.one(sql.unsafe`
      select svc_fold(${text}) as plain, svc_fold(${text} collate "und-x-icu") as icu`);
    expect(folds.icu).toBe(folds.plain);
    expect(folds.plain).toMatch(/^ecole /);
  });

  it('finds buzzes holding every word, accents and case ignored; never a deleted one', async () => {
    const author = await member(key, `writer_${tag()}`);
    const french = await publish(author, 'Rendez-vous au café ce soir');
    const shouting = await publish(author, 'CAFE opening hours');
    await publish(author, 'coffee shop');
    const gone = await publish(author, 'cafe that will be deleted');
    const buzzesFor = async (q: string) => {
      const found = await read(key, `/v1/search?q=${encodeURIComponent(q)}&type=buzzes`);
      expect(found.statusCode, found.body).toBe(200);
      expect(found.json().profiles).toEqual([]);
      return found
        .json()
        .buzzes.map((b: { id: string }) => b.id)
        .sort();
    };
    expect(await buzzesFor('cafe')).toEqual([french.id, shouting.id, gone.id].sort());
    // A word may hold quotes (a link's), which the word index's keys take as they are (migration 0043).
    const quoting = await publish(author, "see x.com/a?b='c' today");
    expect(await buzzesFor("x.com/a?b='c'")).toEqual([quoting.id]);
    expect(await buzzesFor('CAFÉ')).toEqual([french.id, shouting.id, gone.id].sort());
    expect(await buzzesFor('cafe opening')).toEqual([shouting.id]);
    expect(await buzzesFor('café ce soir')).toEqual([french.id]);
    const hit = (await read(key, '/v1/search?q=opening&type=buzzes')).json().buzzes;
    expect(hit).toEqual([
      {
        id: shouting.id,
        type: 'text',
        text: 'CAFE opening hours',
        author_id: author.userId,
        author_username: author.username,
        created_at: shouting.created_at,
      },
    ]);

    expect((await callWithKey(ctx.app, key, 'DELETE', `/v1/buzzes/${gone.id}`)).statusCode).toBe(200);
    expect(await buzzesFor('cafe')).toEqual([french.id, shouting.id].sort());
    expect(await buzzesFor('deleted')).toEqual([]);
    expect((await read(key, '/v1/search?q=cafe&type=buzzes&limit=1')).json().buzzes).toHaveLength(1);
    // Nothing that is a word: no buzz holds it, and the search reads nothing (the word index would
    // take such a query as found in every buzz).
    const wordless = encodeURIComponent('?! …');
    expect((await read(key, `/v1/search?q=${wordless}&type=buzzes`)).json().buzzes).toEqual([]);
    const readsWords = async (q: string) => (await buzzSearchReads({ appId, mode: 'live' }, q)).words.scans;
    expect(await readsWords('opening')).toBe(1);
    expect(await buzzSearchReads({ appId, mode: 'live' }, '?! …')).toEqual({
      listing: { scans: 0, entries: 0 },
      words: { scans: 0, entries: 0 },
      sequential: 0,
    });
  });

  it('takes q of 1 to 100 characters and limit 1 to 50', async () => {
    expect((await asUser(viewer.token, 'GET', `/v1/me/search?q=${'a'.repeat(100)}`)).statusCode).toBe(200);
    expect((await read(key, `/v1/search?q=${'a'.repeat(100)}&type=buzzes`)).statusCode).toBe(200);
    expectInvalid(await read(key, `/v1/search?q=${'a'.repeat(101)}`), 'query', 'q');
    expectInvalid(await read(key, '/v1/search?q='), 'query', 'q');
    expectInvalid(await read(key, '/v1/search'), 'query', 'q');
    expect((await read(key, '/v1/search?q=cafe&type=buzzes&limit=50')).statusCode).toBe(200);
    expectInvalid(await read(key, '/v1/search?q=cafe&limit=51'), 'query', 'limit');
    expectInvalid(await read(key, '/v1/search?q=cafe&limit=0'), 'query', 'limit');
    expectInvalid(await read(key, '/v1/search?q=cafe&type=people'), 'query', 'type');
    expectInvalid(await asUser(viewer.token, 'GET', '/v1/me/search?q=cafe&limit=51'), 'query', 'limit');
  });

  it('ranks the newest matches of common and of rare words alike, however old the rare ones are', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: FUNDS });
    const author = await member(customer.token, `archivist_${tag()}`);
    const t = tag().replace(/\d/g, 'x');
    const [common, rare, few] = [`lumen${t}`, `umbra${t}`, `nox${t}`];
    // Buzzes written straight to the table, minutes apart: their number is the point, not their path.
    // 10,000 a statement: 60,000 in one outlasted the pool's statement timeout on a loaded machine.
    const insert = async (texts: string, count: number, minutesAgo: number) => {
      for (let from = 1; from <= count; from += 10_000)
        await ctx.container.pool.query(sql.unsafe`
          insert into buzzes (id, app_id, mode, author_pk, type, text, created_at)
          select 'buzz_' || ${t} || '_' || ${minutesAgo} || '_' || g, ${customer.app.id}, 'live', p.pk, 'text',
                 ${texts}, now() - make_interval(mins => ${minutesAgo} + g)
          from profiles p, generate_series(${from}::int, ${Math.min(count, from + 9_999)}::int) g
          where p.app_id = ${customer.app.id} and p.username = ${author.username}`);
    };
    // Oldest first: one buzz saying each word many times (it would rank first among any matches),
    // then the word that is rare now, then more buzzes than search reads one by one, then matches
    // of the common word (more than search ranks) and of the other word (one fewer than it ranks, so
    // that the old buzz makes up the number).
    await insert(`${common} ${common} ${common} ${few} ${few} ${few}`, 1, 10 * SEARCH_BUZZ_WALK);
    await insert(`the ${rare} of the archive`, 1, 5 * SEARCH_BUZZ_WALK);
    await insert('filler', SEARCH_BUZZ_WALK, 2 * SEARCH_BUZZ_WALK);
    await insert(`a ${common} buzz and a ${few} buzz`, SEARCH_BUZZ_CANDIDATES - 1, 1_000);
    await insert(`a ${common} buzz`, 50, 0);
    const search = async (q: string) => {
      const found = await read(customer.token, `/v1/search?q=${q}&type=buzzes&limit=50`);
      expect(found.statusCode, found.body).toBe(200);
      return found.json().buzzes.map((buzz: { text: string }) => buzz.text);
    };
    // The common word's newest matches are read from the newest buzzes: the old buzz is not among
    // them, however well it would rank.
    const commonHits = await search(common);
    expect(commonHits).toHaveLength(50);
    expect(commonHits).not.toContain(`${common} ${common} ${common} ${few} ${few} ${few}`);
    // The rare word is older than every buzz read one by one: the word index finds it.
    expect(await search(rare)).toEqual([`the ${rare} of the archive`]);
    // The newest buzzes hold too few of the other word: the word index finds the old one too, and it
    // ranks first.
    const fewHits = await search(few);
    expect(fewHits[0]).toBe(`${common} ${common} ${common} ${few} ${few} ${few}`);
    expect(fewHits).toHaveLength(50);
  });

  /**
   * Runs `check` on an app of `count` buzzes of which one in `every` holds two words (the query), its
   * buzzes analyzed, then deletes them. Their times, one a second unless `seconds` apart, are shuffled
   * against the order they are written in (7,919 is prime to the counts), as a busy app's buzzes lie in
   * the heap.
   */
  async function withBuzzes(
    count: number,
    every: number,
    check: (scope: Scope, q: string) => Promise<void>,
    seconds = 1,
  ) {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: FUNDS });
    const author = await member(customer.token, `walker_${tag()}`);
    const t = tag().replace(/\d/g, 'x');
    const [first, second] = [`alba${t}`, `brisa${t}`];
    await ctx.container.pool.query(sql.unsafe`
      insert into buzzes (id, app_id, mode, author_pk, type, text, created_at)
      select 'buzz_' || ${t} || '_' || g, ${customer.app.id}, 'live', p.pk, 'text',
             case when g % ${every} = 0 then ${`${first} and ${second}`} else 'filler' end,
             now() - make_interval(secs => ((g * 7919) % ${count}) * ${seconds}::float8)
      from profiles p, generate_series(1, ${count}::int) g
      where p.app_id = ${customer.app.id} and p.username = ${author.username}`);
    try {
      await ctx.container.pool.query(sql.unsafe`analyze buzzes`);
      await check({ appId: customer.app.id, mode: 'live' }, `${first} ${second}`);
    } finally {
      await ctx.container.pool.query(sql.unsafe`delete from buzzes where app_id = ${customer.app.id}`);
    }
  }
  it('walks the newest buzzes of an app with fewer than the walk in order, never reading them all', async () => {
    // One buzz in ten holds both words: common enough in the newest buzzes to be walked to.
    const count = 20_000;
    await withBuzzes(count, 10, async (scope, q) => {
      // The probe's 1,000 and the walk's 2,000 to its 200 matches, not the app's 20,000 read whole to
      // be sorted (as a plan made for an app of average size would).
      const reads = await buzzSearchReads(scope, q);
      expect(reads.listing.entries).toBeLessThan(count / 4);
      expect(reads.words.scans).toBe(0);
      expect(reads.sequential).toBe(0);
    });
  });

  it('reads the word index for words too rare in the app to walk to, though common in the probe', async () => {
    // One buzz in a hundred: 10 in the probe's 1,000, within the walk's reach, but the walk would read
    // the whole app to its 200 matches, where the index fetches them.
    const count = 20_000;
    await withBuzzes(count, 100, async (scope, q) => {
      const reads = await buzzSearchReads(scope, q);
      expect(reads.listing.entries + reads.words.entries).toBeLessThan(count / 4);
      expect(reads.words.scans).toBe(1);
      expect(reads.sequential).toBe(0);
    });
  });

  it('reads the word index from the newest week back, fetching about the matches it ranks, not all', async () => {
    // One buzz in twenty, over twenty weeks: 50 matches a week, 1,000 in all. The probe finds the words
    // in 5% of the newest buzzes, too few to walk to at 50 a week; the index reads the last week or two,
    // then as many weeks as their pace says the 200 newest need, and stops.
    const count = 20_000;
    const weeks = 20;
    await withBuzzes(
      count,
      20,
      async (scope, q) => {
        const reads = await buzzSearchReads(scope, q);
        expect(reads.words.entries).toBeGreaterThanOrEqual(SEARCH_BUZZ_CANDIDATES);
        expect(reads.words.entries).toBeLessThan(count / 20 / 2);
        expect(reads.words.scans).toBeLessThanOrEqual(3);
        expect(reads.sequential).toBe(0);
        // The candidates are the 200 newest of all the matches, whatever week each is in.
        const candidates = await searchStore(ctx.container.searchPool).searchBuzzes(
          scope,
          q,
          SEARCH_BUZZ_CANDIDATES,
        );
        const newest = await ctx.container.pool.anyFirst(sql.type(z.object({ id: z.string() }))`
          select id from buzzes
          where app_id = ${scope.appId} and mode = ${scope.mode} and deleted_at is null
            and search @@ plainto_tsquery('simple', ${q})
          order by created_at desc, id desc
          limit ${SEARCH_BUZZ_CANDIDATES}`);
        expect(candidates.map((buzz) => buzz.id).sort()).toEqual([...newest].sort());
        // A replica of the previous release, still running while an upgrade restarts them one at a
        // time, gets the same page through the call it knows (migration 0043).
        const previous = await ctx.container.searchPool.anyFirst(sql.type(z.object({ id: z.string() }))`
          select id from svc_search_buzzes(${scope.appId}, ${scope.mode}, ${q}, 20, 6, 1000, 60000, 200)`);
        const page = await searchStore(ctx.container.searchPool).searchBuzzes(scope, q, 20);
        expect(previous).toEqual(page.map((buzz) => buzz.id));
      },
      (weeks * 7 * 86_400) / count,
    );
  });

  it('answers, not fails, for text PostgreSQL cannot take (a NUL), in search and in a buzz id', async () => {
    const answers = {
      'search for buzzes': (await read(key, '/v1/search?q=a%00b&type=buzzes')).statusCode,
      'search as a user': (await asUser(viewer.token, 'GET', '/v1/me/search?q=a%00b')).statusCode,
      'buzz id': (await read(key, '/v1/buzzes/bz_%00x')).statusCode,
      'buzz id of a reaction': (await asUser(viewer.token, 'PUT', '/v1/me/buzzes/bz_%00x/reaction', {}))
        .statusCode,
    };
    expect(answers).toEqual({
      'search for buzzes': expect.toBeOneOf([200, 422]),
      'search as a user': expect.toBeOneOf([200, 422]),
      'buzz id': expect.toBeOneOf([404, 422]),
      'buzz id of a reaction': expect.toBeOneOf([404, 422]),
    });
  });
});

describe('isolation', () => {
  it('keeps an app’s test and live data apart, and apps apart', async () => {
    const a = await createCustomer(ctx.container, { balanceMicros: FUNDS });
    const aLive = await ctx.container.accounts.createKey({ appId: a.app.id, kind: 'secret', mode: 'live' });
    const b = await createCustomer(ctx.container);
    const username = `same_${tag()}`;
    const userId = `same-user-${tag()}`;
    const inTest = await member(a.token, username, { full_name: 'Test' }, ctx, userId);
    const inLive = await member(aLive.token, username, { full_name: 'Live' }, ctx, userId);
    const inB = await member(b.token, username, { full_name: 'B' }, ctx, userId);
    const testBuzz = await publish(inTest, 'a test buzz');
    const liveBuzz = await publish(inLive, 'a live buzz');
    const bBuzz = await publish(inB, 'a buzz of app b');

    expect(await buzzOf(a.token, testBuzz.id)).toEqual(testBuzz);
    expect(await buzzOf(aLive.token, liveBuzz.id)).toEqual(liveBuzz);
    expectError(await read(a.token, `/v1/buzzes/${liveBuzz.id}`), 404);
    expectError(await read(aLive.token, `/v1/buzzes/${testBuzz.id}`), 404);
    expectError(await read(a.token, `/v1/buzzes/${bBuzz.id}`), 404);
    expectError(await read(b.token, `/v1/buzzes/${testBuzz.id}`), 404);
    expectError(await read(aLive.token, `/v1/buzzes/${liveBuzz.id}/comments`), 200);
    expectError(await read(a.token, `/v1/buzzes/${liveBuzz.id}/comments`), 404);

    expect(idsOf((await read(a.token, `/v1/buzzes?author=${username}`)).json())).toEqual([testBuzz.id]);
    expect((await read(aLive.token, '/v1/buzzes?limit=100')).json()).toEqual({
      items: [liveBuzz],
      next_cursor: null,
    });
    expect(idsOf((await read(a.token, '/v1/buzzes?limit=100')).json())).not.toContain(liveBuzz.id);
    expect((await profileOf(a.token, username)).full_name).toBe('Test');
    expect((await profileOf(aLive.token, username)).full_name).toBe('Live');
    expect(
      (await read(aLive.token, '/v1/search?q=buzz&type=buzzes')).json().buzzes.map((x: Buzz) => x.id),
    ).toEqual([liveBuzz.id]);

    // Writes reach only their own app and mode, whatever the user id.
    expectError(await asUser(inB.token, 'DELETE', `/v1/me/buzzes/${testBuzz.id}`), 404);
    expectError(await asUser(inLive.token, 'DELETE', `/v1/me/buzzes/${testBuzz.id}`), 404);
    expectError(await asUser(inTest.token, 'DELETE', `/v1/me/buzzes/${liveBuzz.id}`), 404);
    expectError(await callWithKey(ctx.app, b.token, 'DELETE', `/v1/buzzes/${testBuzz.id}`), 404);
    expectError(await callWithKey(ctx.app, a.token, 'DELETE', `/v1/buzzes/${liveBuzz.id}`), 404);
    expectError(
      await asUser(inB.token, 'PUT', `/v1/me/buzzes/${testBuzz.id}/reaction`, { kind: 'like' }),
      404,
    );
    expectError(
      await asUser(inTest.token, 'POST', `/v1/me/buzzes/${liveBuzz.id}/comments`, { text: 'x' }),
      404,
    );
    expect(await buzzOf(a.token, testBuzz.id)).toEqual(testBuzz);
    expect(await buzzOf(aLive.token, liveBuzz.id)).toEqual(liveBuzz);
    expect(await buzzOf(b.token, bBuzz.id)).toEqual(bBuzz);

    // A token is its app's and mode's only: B's user cannot act in A even with A's usernames.
    const follower = await member(b.token, `follower_${tag()}`);
    expect((await asUser(follower.token, 'PUT', `/v1/me/following/${username}`)).json().followers).toBe(1);
    expect((await profileOf(a.token, username)).followers).toBe(0);
    expect((await profileOf(aLive.token, username)).followers).toBe(0);
    expect((await profileOf(b.token, username)).followers).toBe(1);
  });
});

describe('prices', () => {
  it('publish once per Idempotency-Key of a user: a retry replays, another user’s same key is theirs', async () => {
    const { token: key, account } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: FUNDS,
    });
    const alice = await member(key, `alice_${tag()}`);
    const bob = await member(key, `bob_${tag()}`);
    const publish = (token: string, text: string) =>
      ctx.app.inject({
        method: 'POST',
        url: '/v1/me/buzzes',
        headers: { authorization: `Bearer ${token}`, 'idempotency-key': 'retry-1' },
        remoteAddress: uniqueAddress(),
        payload: { text },
      });
    const balance = async () => (await ctx.container.billing.getBalance(account.id)).balance_micros;
    const before = await balance();

    const first = await publish(alice.token, 'once');
    const again = await publish(alice.token, 'once');
    expect(first.statusCode, first.body).toBe(200);
    expect(again.statusCode).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json().id).toBe(first.json().id);
    expect(again.headers['x-svc-cost-usd']).toBe(first.headers['x-svc-cost-usd']);
    // The same key with another request of the same user is refused; another user's is their own.
    expect((await publish(alice.token, 'other text')).statusCode).toBe(422);
    const bobs = await publish(bob.token, 'once');
    expect(bobs.statusCode).toBe(200);
    expect(bobs.headers['idempotent-replayed']).toBeUndefined();
    expect(bobs.json().id).not.toBe(first.json().id);

    expect((await profileOf(key, alice.username)).buzzes).toBe(1);
    expect(before - (await balance())).toBe(2 * 500);
  });

  it('charge each write of a live key one writes.calls; reads and failed writes are free', async () => {
    const { token: key, account } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: FUNDS,
    });
    const aliceToken = await mintToken(key, `alice-${tag()}`);
    const bobToken = await mintToken(key, `bob-${tag()}`);
    const alice = `alice_${tag()}`;
    const bob = `bob_${tag()}`;
    // Every call's status and cost header, against what they should be, compared at the end.
    type Seen = { call: string; status: number; cost: string };
    const seen: Seen[] = [];
    const expected: Seen[] = [];
    const check = async (call: string, reply: Promise<Reply>, status: number, cost: string) => {
      const done = await reply;
      seen.push({ call, status: done.statusCode, cost: String(done.headers['x-svc-cost-usd']) });
      expected.push({ call, status, cost });
      return done;
    };
    const write = (call: string, reply: Promise<Reply>) => check(call, reply, 200, WRITE_COST);
    const free = (call: string, reply: Promise<Reply>) => check(call, reply, 200, FREE);
    const refused = (call: string, reply: Promise<Reply>, status: number) => check(call, reply, status, FREE);

    await write('profile', asUser(aliceToken, 'PUT', '/v1/me/profile', { username: alice }));
    await write('profile', asUser(bobToken, 'PUT', '/v1/me/profile', { username: bob }));
    const buzz = (
      await write('publish', asUser(aliceToken, 'POST', '/v1/me/buzzes', { text: 'priced' }))
    ).json();
    const reaction = `/v1/me/buzzes/${buzz.id}/reaction`;
    await write('react', asUser(bobToken, 'PUT', reaction, { kind: 'like' }));
    await write('react again', asUser(bobToken, 'PUT', reaction, { kind: 'love' }));
    await write('unreact', asUser(bobToken, 'DELETE', reaction));
    await write('comment', asUser(bobToken, 'POST', `/v1/me/buzzes/${buzz.id}/comments`, { text: 'nice' }));
    await write('follow', asUser(bobToken, 'PUT', `/v1/me/following/${alice}`));
    await write('unfollow', asUser(bobToken, 'DELETE', `/v1/me/following/${alice}`));
    await write('verify', callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/${alice}`, { verified: true }));
    const second = (
      await write('publish', asUser(aliceToken, 'POST', '/v1/me/buzzes', { text: 'second' }))
    ).json();
    await write('delete own', asUser(aliceToken, 'DELETE', `/v1/me/buzzes/${second.id}`));

    await free('my profile', asUser(aliceToken, 'GET', '/v1/me/profile'));
    await free('my search', asUser(aliceToken, 'GET', '/v1/me/search?q=alice'));
    await free('profile', read(key, `/v1/profiles/${alice}`));
    await free('buzzes', read(key, '/v1/buzzes'));
    await free('search', read(key, '/v1/search?q=priced'));
    await free('buzz', read(key, `/v1/buzzes/${buzz.id}`));
    await free('comments', read(key, `/v1/buzzes/${buzz.id}/comments`));
    await write('moderate', callWithKey(ctx.app, key, 'DELETE', `/v1/buzzes/${buzz.id}`));

    await refused('invalid buzz', asUser(aliceToken, 'POST', '/v1/me/buzzes', { text: '' }), 422);
    await refused('taken username', asUser(bobToken, 'PUT', '/v1/me/profile', { username: alice }), 409);
    await refused('delete another’s', asUser(bobToken, 'DELETE', `/v1/me/buzzes/${second.id}`), 404);
    await refused('follow nobody', asUser(bobToken, 'PUT', `/v1/me/following/nobody_${tag()}`), 404);
    await refused('unfollow again', asUser(bobToken, 'DELETE', `/v1/me/following/${alice}`), 404);
    await refused('react to deleted', asUser(bobToken, 'PUT', reaction, { kind: 'like' }), 404);
    await refused('moderate again', callWithKey(ctx.app, key, 'DELETE', `/v1/buzzes/${buzz.id}`), 404);
    await refused(
      'verify nobody',
      callWithKey(ctx.app, key, 'PATCH', `/v1/profiles/nobody_${tag()}`, { verified: true }),
      404,
    );

    expect(seen).toEqual(expected);
    const charged = seen.reduce((sum, call) => sum + Math.round(Number(call.cost) * 1e6), 0);
    const balance = await ctx.container.billing.getBalance(account.id);
    expect(FUNDS - balance.balance_micros).toBe(charged);
    expect(charged).toBe(13 * WRITE_MICROS);
  });

  it('take publishes of a live key that come at once in turns, each paid and counted as alone', async () => {
    const { token: key, account } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: FUNDS,
    });
    const t = tag();
    const authors = await Promise.all(Array.from({ length: 8 }, (_, i) => member(key, `turn_${t}_${i}`)));
    const withoutProfile = await mintToken(key, `nobody-${t}`);
    const replies = await Promise.all([
      ...Array.from({ length: 40 }, (_, i) =>
        asUser(authors[i % authors.length]!.token, 'POST', '/v1/me/buzzes', { text: `turn ${i}` }),
      ),
      ...Array.from({ length: 4 }, () => asUser(withoutProfile, 'POST', '/v1/me/buzzes', { text: 'none' })),
    ]);

    const seen = replies.map((reply) => `${reply.statusCode} ${reply.headers['x-svc-cost-usd']}`);
    expect(seen).toEqual([...Array(40).fill(`200 ${WRITE_COST}`), ...Array(4).fill(`409 ${FREE}`)]);
    for (const author of authors) expect((await profileOf(key, author.username)).buzzes).toBe(5);
    const totals = await ledgerTotals(ctx.container, account.id);
    // The 8 profiles and the 40 publishes.
    expect(FUNDS - totals.balance).toBe(48 * WRITE_MICROS);
    expect(totals.ledger).toBe(totals.balance);
  });
});

describe('the per-user cap', () => {
  const HOUR = 3_600_000;
  /** Ten minutes before the end of an hour's window, on a clock of its own. */
  let capped: TestContext;
  beforeAll(async () => {
    const windowStart = Math.floor(Date.now() / HOUR) * HOUR;
    capped = await startTestApp({ clock: createManualClock(new Date(windowStart + 50 * 60_000)) });
  });
  afterAll(async () => {
    await capped.close();
  });

  it('refuses the 101st buzz write of a user within the hour, and only that user’s', async () => {
    const { token: key } = await createCustomer(capped.container);
    const [heavy, light] = await Promise.all([
      member(key, `heavy_${tag()}`, {}, capped),
      member(key, `light_${tag()}`, {}, capped),
    ]);
    const cap = USER_LIMITS.buzzes.limit;
    for (let batch = 0; batch < cap; batch += 25) {
      const size = Math.min(25, cap - batch);
      const replies = await Promise.all(
        Array.from({ length: size }, (_, i) =>
          asUser(heavy.token, 'POST', '/v1/me/buzzes', { text: `buzz ${batch + i}` }, capped),
        ),
      );
      expect(replies.map((reply) => reply.statusCode)).toEqual(Array(size).fill(200));
    }
    const over = await asUser(heavy.token, 'POST', '/v1/me/buzzes', { text: 'one too many' }, capped);
    expect(over.statusCode, over.body).toBe(429);
    expect(over.json().error.type).toBe('rate_limited');
    expect(over.headers['x-svc-cost-usd']).toBe(FREE);
    const retryAfter = Number(over.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(3_600);
    // Deletes share the buzz writes' cap; other writes have caps of their own.
    const anyId = (await read(key, `/v1/buzzes?author=${heavy.username}&limit=1`, capped)).json().items[0].id;
    expectError(await asUser(heavy.token, 'DELETE', `/v1/me/buzzes/${anyId}`, undefined, capped), 429);
    expect((await profileOf(key, heavy.username, capped)).buzzes).toBe(cap);

    expect(
      (await asUser(light.token, 'POST', '/v1/me/buzzes', { text: 'still fine' }, capped)).statusCode,
    ).toBe(200);
    const reacted = await asUser(
      heavy.token,
      'PUT',
      `/v1/me/buzzes/${anyId}/reaction`,
      { kind: 'like' },
      capped,
    );
    expect(reacted.statusCode, reacted.body).toBe(200);

    // The next hour's window starts afresh.
    capped.clock.advance(10 * 60_000 + 1_000);
    expect(
      (await asUser(heavy.token, 'POST', '/v1/me/buzzes', { text: 'a new hour' }, capped)).statusCode,
    ).toBe(200);
    capped.clock.advance(-(10 * 60_000 + 1_000));
  });

  it('answers Retry-After up to the end of the hour’s window', async () => {
    const { token: key } = await createCustomer(capped.container);
    const user = await member(key, `window_${tag()}`, {}, capped);
    const cap = USER_LIMITS.buzzes.limit;
    const replies = await Promise.all(
      Array.from({ length: cap + 1 }, (_, i) =>
        asUser(user.token, 'POST', '/v1/me/buzzes', { text: `b ${i}` }, capped),
      ),
    );
    const refusals = replies.filter((reply) => reply.statusCode === 429);
    expect(replies.filter((reply) => reply.statusCode === 200)).toHaveLength(cap);
    expect(refusals).toHaveLength(1);
    const untilWindowEnd = Math.ceil((HOUR - (capped.clock.now().getTime() % HOUR)) / 1_000);
    const retryAfter = Number(refusals[0]!.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(untilWindowEnd);
  });
});

describe('events', () => {
  it('are written for publishing, a new reaction, a comment and a new follow, for the app and mode', async () => {
    const { token: key, app } = await createCustomer(ctx.container);
    await ctx.container.webhooks.create(
      { appId: app.id, mode: 'test' },
      {
        url: 'https://hooks.example.com/social',
        event_types: ['buzz.created', 'buzz.reaction', 'buzz.comment', 'follow.created'],
      },
    );
    const author = await member(key, `evt_author_${tag()}`);
    const fan = await member(key, `evt_fan_${tag()}`);
    const buzz = await publish(author, 'an eventful buzz');
    expect(
      (await asUser(fan.token, 'PUT', `/v1/me/buzzes/${buzz.id}/reaction`, { kind: 'like' })).statusCode,
    ).toBe(200);
    // A change of kind and a second follow emit nothing.
    expect(
      (await asUser(fan.token, 'PUT', `/v1/me/buzzes/${buzz.id}/reaction`, { kind: 'wow' })).statusCode,
    ).toBe(200);
    const comment = await asUser(fan.token, 'POST', `/v1/me/buzzes/${buzz.id}/comments`, { text: 'first!' });
    expect(comment.statusCode).toBe(200);
    expect((await asUser(fan.token, 'PUT', `/v1/me/following/${author.username}`)).statusCode).toBe(200);
    expect((await asUser(fan.token, 'PUT', `/v1/me/following/${author.username}`)).statusCode).toBe(200);
    // A publish refused for want of a profile made no buzz, so no event.
    const nobody = await mintToken(key, `evt_nobody_${tag()}`);
    expect((await asUser(nobody, 'POST', '/v1/me/buzzes', { text: 'never' })).statusCode).toBe(409);

    const events = await ctx.container.pool.any(sql.unsafe`
      select type, mode, profile_id, body from webhook_events where app_id = ${app.id} order by created_at, id`);
    const byType = Object.fromEntries(events.map((event) => [event.type, event]));
    expect(events.map((event) => event.type).sort()).toEqual([
      'buzz.comment',
      'buzz.created',
      'buzz.reaction',
      'follow.created',
    ]);
    for (const event of events)
      expect({ type: event.type, mode: event.mode, profile: event.profile_id }).toEqual({
        type: event.type,
        mode: 'test',
        profile: author.userId,
      });
    const data = (type: string) => {
      const body = JSON.parse(byType[type]!.body as string);
      expect(body).toMatchObject({ type, app_id: app.id, mode: 'test' });
      return body.data;
    };
    expect(data('buzz.created')).toEqual({ buzz });
    expect(data('buzz.reaction')).toMatchObject({
      buzz: { id: buzz.id, author_id: author.userId, reactions: 1 },
      reaction: { kind: 'like', user_id: fan.userId, username: fan.username },
    });
    expect(data('buzz.comment')).toEqual({
      buzz: { id: buzz.id, author_id: author.userId, author_username: author.username },
      comment: comment.json(),
    });
    expect(data('follow.created')).toMatchObject({
      profile: { id: author.userId, username: author.username, followers: 1 },
      follower: { id: fan.userId, username: fan.username },
    });
  });
});

describe('the sandbox', () => {
  it('keeps the sandbox seeded by a first write that then fails', async () => {
    const { token: key, app } = await createCustomer(ctx.container);
    const noProfile = await mintToken(key, `nobody-${tag()}`);
    expectError(await asUser(noProfile, 'POST', '/v1/me/buzzes', { text: 'first' }), 409, 'PROFILE_REQUIRED');
    const seeded = await ctx.container.pool.maybeOne(
      sql.unsafe`select seeded_at from sandboxes where app_id = ${app.id} and part = 'social'`,
    );
    expect(seeded).not.toBeNull();
  });

  it('gives a test key’s app fixtures on its first call, and a live key none', async () => {
    const { token: key, app } = await createCustomer(ctx.container, { balanceMicros: FUNDS });
    const first = await read(key, '/v1/buzzes');
    expect(first.statusCode, first.body).toBe(200);
    const page = first.json<Page<Buzz>>();
    expect(page.items).toHaveLength(20);
    expect(page.next_cursor).not.toBeNull();
    for (const buzz of page.items) expect(buzz.author_id).toMatch(/^sandbox-/);
    const sandboxName = page.items[0]!.author_username;
    expect(await profileOf(key, sandboxName)).toMatchObject({ id: page.items[0]!.author_id });

    const cafes = (await read(key, '/v1/search?q=cafe&type=buzzes')).json().buzzes;
    expect(cafes.length).toBeGreaterThan(0);
    for (const buzz of cafes)
      expect(buzz.text.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase()).toContain('cafe');

    // A sandbox user acts like any other.
    const sandboxUser = await mintToken(key, page.items[0]!.author_id);
    expect((await asUser(sandboxUser, 'GET', '/v1/me/profile')).json().username).toBe(sandboxName);

    const live = await ctx.container.accounts.createKey({ appId: app.id, kind: 'secret', mode: 'live' });
    const liveApp = await createCustomer(ctx.container, { mode: 'live' });
    for (const liveKey of [live.token, liveApp.token]) {
      expect((await read(liveKey, '/v1/buzzes')).json()).toEqual({ items: [], next_cursor: null });
      expect((await read(liveKey, '/v1/search?q=cafe&type=buzzes')).json().buzzes).toEqual([]);
      expectError(await read(liveKey, `/v1/profiles/${sandboxName}`), 404);
      expectError(await read(liveKey, `/v1/buzzes/${page.items[0]!.id}`), 404);
    }

    // Found by profile search: as a sandbox user, then as the app's server; a live key finds none.
    const asSandboxUser = await asUser(sandboxUser, 'GET', `/v1/me/search?q=${sandboxName}&type=profiles`);
    expect(asSandboxUser.statusCode, asSandboxUser.body).toBe(200);
    // The app's user ids go to its server only.
    expect(asSandboxUser.json().profiles[0]).toEqual({
      username: sandboxName,
      full_name: expect.any(String),
      verified: expect.any(Boolean),
      followers: expect.any(Number),
    });
    const found = await read(key, `/v1/search?q=${sandboxName}`);
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json().profiles[0]).toMatchObject({ username: sandboxName, id: page.items[0]!.author_id });
    for (const liveKey of [live.token, liveApp.token]) {
      expect((await read(liveKey, `/v1/search?q=${sandboxName}`)).json()).toEqual({
        query: sandboxName,
        profiles: [],
        buzzes: [],
      });
    }
  });

  it('has counters that agree with its rows', async () => {
    const { token: key, app } = await createCustomer(ctx.container);
    expect((await read(key, '/v1/buzzes?limit=1')).statusCode).toBe(200);
    const recount = await miscounted(app.id, 'test');
    expect(recount.profiles).toBeGreaterThan(0);
    expect(recount.buzzes).toBeGreaterThan(0);
    expect(recount.wrongProfiles).toEqual([]);
    expect(recount.wrongBuzzes).toEqual([]);
  });
});
