import { randomInt } from 'node:crypto';
import type { Interceptor } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

/** Keys looked up in PostgreSQL by their hash. */
let keyLookups = 0;
const countKeyLookups: Interceptor = {
  name: 'count-key-lookups',
  beforeQueryExecution: async (_context, query) => {
    if (query.sql.includes('k.token_hash =')) keyLookups += 1;
    return null;
  },
};

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp({ interceptors: [countKeyLookups] });
});
afterAll(async () => {
  await ctx.close();
});

const balance = (headers: Record<string, string>, remoteAddress = uniqueAddress()) =>
  ctx.app.inject({ method: 'GET', url: '/v1/realtime/balance', headers, remoteAddress });

describe('the secret key', () => {
  it('is accepted as Authorization: Bearer', async () => {
    const { token, account } = await createCustomer(ctx.container);
    const response = await balance({ authorization: `Bearer ${token}` });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ account_id: account.id, balance_usd: 0, ledger: [] });
    expect(response.headers['x-svc-cost-usd']).toBe('0.000000');
  });

  it('is accepted as X-API-Key', async () => {
    const { token, account } = await createCustomer(ctx.container, { mode: 'live' });
    const response = await balance({ 'x-api-key': token });
    expect(response.statusCode).toBe(200);
    expect(response.json().account_id).toBe(account.id);
  });

  it.each([
    ['missing', {}, /No API key/],
    ['empty', { 'x-api-key': '' }, /No API key/],
    ['malformed', { authorization: 'Bearer not-a-key' }, /not a secret key/],
    ['of another scheme', { authorization: 'Basic c3ZjOnN2Yw==' }, /not a secret key/],
    ['unknown', { authorization: `Bearer svc_test_${'a'.repeat(32)}` }, /no such key/],
    ['publishable', { 'x-api-key': `pk_test_${'b'.repeat(32)}` }, /publishable keys/],
  ])('is refused with 401 when %s', async (_case, headers, message) => {
    const response = await balance(headers);
    expect(response.statusCode).toBe(401);
    const body = response.json();
    expect(body.error.type).toBe('authentication_error');
    expect(body.error.message).toMatch(message);
    expect(response.headers['x-svc-cost-usd']).toBe('0.000000');
  });

  it('is refused with 401 once revoked', async () => {
    const { token, key } = await createCustomer(ctx.container);
    expect((await balance({ authorization: `Bearer ${token}` })).statusCode).toBe(200);
    await ctx.container.accounts.revokeKey(key.id);
    const response = await balance({ authorization: `Bearer ${token}` });
    expect(response.statusCode).toBe(401);
    expect(response.json().error.message).toMatch(/revoked/);
  });

  it('of a publishable kind exists for the app but opens no secret-key endpoint', async () => {
    const { app } = await createCustomer(ctx.container);
    const { token } = await ctx.container.accounts.createKey({
      appId: app.id,
      kind: 'publishable',
      mode: 'test',
    });
    expect(token).toMatch(/^pk_test_[0-9A-Za-z]{32}$/);
    expect((await balance({ authorization: `Bearer ${token}` })).statusCode).toBe(401);
  });
});

describe('the invalid-key lockout', () => {
  it('answers 401 to twenty bad keys and 429 from the twenty-first request on, even with a good key', async () => {
    const address = uniqueAddress();
    const { token } = await createCustomer(ctx.container);
    for (let attempt = 1; attempt <= 20; attempt += 1) {
      const response = await balance(
        { 'x-api-key': `svc_test_${String(attempt).padStart(32, '0')}` },
        address,
      );
      expect(response.statusCode, `attempt ${attempt}`).toBe(401);
    }
    const locked = await balance({ 'x-api-key': `svc_test_${'9'.repeat(32)}` }, address);
    expect(locked.statusCode).toBe(429);
    expect(locked.json().error).toMatchObject({ type: 'rate_limited' });
    const retryAfter = Number(locked.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(600);

    expect((await balance({ authorization: `Bearer ${token}` }, address)).statusCode).toBe(429);
    expect((await balance({ authorization: `Bearer ${token}` }, uniqueAddress())).statusCode).toBe(200);
  });

  it('lets exactly twenty of forty bad keys sent at once through to a 401', async () => {
    const address = uniqueAddress();
    const responses = await Promise.all(
      Array.from({ length: 40 }, (_, attempt) =>
        balance({ 'x-api-key': `svc_test_${String(attempt).padStart(32, '7')}` }, address),
      ),
    );
    const statuses = responses.map((response) => response.statusCode).sort();
    expect(statuses).toEqual([...Array(20).fill(401), ...Array(20).fill(429)]);
  });

  it('counts an IPv6 client by its /64, so that rotating addresses does not help', async () => {
    const network = `2001:db8:${randomInt(1, 0xffff).toString(16)}:${randomInt(1, 0xffff).toString(16)}`;
    for (let attempt = 1; attempt <= 20; attempt += 1) {
      const address = `${network}:${attempt.toString(16)}::${randomInt(1, 0xffff).toString(16)}`;
      const response = await balance(
        { 'x-api-key': `svc_test_${String(attempt).padStart(32, '6')}` },
        address,
      );
      expect(response.statusCode, `attempt ${attempt}`).toBe(401);
    }
    expect((await balance({ 'x-api-key': 'svc_test_nope' }, `${network}::abcd`)).statusCode).toBe(429);
    // Another /64 is another client.
    expect((await balance({ 'x-api-key': 'svc_test_nope' }, '2001:db8:ffff:ffff::1')).statusCode).toBe(401);
  });

  it('looks up no key of a locked-out address, and keeps no unknown key in the cache', async () => {
    const address = uniqueAddress();
    const madeUp = (n: number) => ({ 'x-api-key': `svc_test_${String(n).padStart(32, '5')}` });
    const before = keyLookups;
    for (let attempt = 1; attempt <= 20; attempt += 1) await balance(madeUp(attempt), address);
    expect(keyLookups - before).toBe(20);
    for (let attempt = 21; attempt <= 30; attempt += 1)
      expect((await balance(madeUp(attempt), address)).statusCode).toBe(429);
    expect(keyLookups - before).toBe(20);
    // Made up keys are not kept, so that a flood of them cannot push the real ones out: asked again
    // (from an address not locked out), one is looked up again.
    expect((await balance(madeUp(1), uniqueAddress())).statusCode).toBe(401);
    expect(keyLookups - before).toBe(21);
  });

  it('refuses a locked-out address alone, when another asks for the same key at once', async () => {
    const locked = uniqueAddress();
    for (let attempt = 1; attempt <= 20; attempt += 1)
      await balance({ 'x-api-key': `svc_test_${String(attempt).padStart(32, '4')}` }, locked);
    // A key no replica has cached yet: both requests would share its one lookup.
    const { token } = await createCustomer(ctx.container);
    const headers = { authorization: `Bearer ${token}` };
    const [fromLocked, fromOther] = await Promise.all([balance(headers, locked), balance(headers)]);
    expect(fromLocked.statusCode).toBe(429);
    expect(fromOther.statusCode).toBe(200);
  });

  it('does not count requests that carry no key at all', async () => {
    const address = uniqueAddress();
    for (let attempt = 1; attempt <= 25; attempt += 1) {
      expect((await balance({}, address)).statusCode).toBe(401);
    }
  });

  it('counts per address across app instances, since the counter lives in Redis', async () => {
    const address = uniqueAddress();
    const other = await startTestApp();
    try {
      for (let attempt = 1; attempt <= 20; attempt += 1) {
        const app = attempt % 2 === 0 ? ctx.app : other.app;
        const response = await app.inject({
          method: 'GET',
          url: '/v1/realtime/balance',
          headers: { 'x-api-key': `svc_live_${String(attempt).padStart(32, 'x')}` },
          remoteAddress: address,
        });
        expect(response.statusCode).toBe(401);
      }
      expect((await balance({ 'x-api-key': 'nope' }, address)).statusCode).toBe(429);
    } finally {
      await other.close();
    }
  });
});

describe('the daily request cap', () => {
  it('lets the Free plan make exactly 100 requests a day per key, then answers 429 until UTC midnight', async () => {
    ctx.clock.set('2026-03-10T23:58:00Z');
    const { token } = await createCustomer(ctx.container, { plan: 'free' });
    const headers = { authorization: `Bearer ${token}` };
    for (let call = 1; call <= 100; call += 1) {
      const response = await balance(headers);
      expect(response.statusCode, `call ${call}`).toBe(200);
      expect(response.headers['ratelimit-limit']).toBe('100');
      expect(response.headers['ratelimit-remaining']).toBe(String(100 - call));
    }
    const over = await balance(headers);
    expect(over.statusCode).toBe(429);
    expect(over.json().error.message).toMatch(/Daily request cap of 100/);
    expect(over.headers['ratelimit-remaining']).toBe('0');
    expect(over.headers['ratelimit-reset']).toBe('120');
    expect(over.headers['retry-after']).toBe('120');

    ctx.clock.set('2026-03-11T00:00:00Z');
    const nextDay = await balance(headers);
    expect(nextDay.statusCode).toBe(200);
    expect(nextDay.headers['ratelimit-remaining']).toBe('99');
  });

  it('is counted per key: a second key of the same app has its own', async () => {
    ctx.clock.set('2026-03-12T10:00:00Z');
    const { token, app } = await createCustomer(ctx.container, { plan: 'free' });
    for (let call = 1; call <= 101; call += 1) await balance({ authorization: `Bearer ${token}` });
    expect((await balance({ authorization: `Bearer ${token}` })).statusCode).toBe(429);
    const second = await ctx.container.accounts.createKey({ appId: app.id, kind: 'secret', mode: 'test' });
    expect((await balance({ authorization: `Bearer ${second.token}` })).statusCode).toBe(200);
  });

  // A chat credential and an org identity's credential admit in their handler: the chat credential's
  // own Redis work shares the admission's round trip, the org's comes after finding the org.
  it.each([
    {
      what: 'invalid',
      url: '/v1/realtime/chat/tokens',
      payload: { user_id: 'u-1', ttl_seconds: 1 },
      status: 422,
    },
    {
      what: 'refused before they admit',
      url: '/v1/orgs/no-such-org/members/ana/chat-token',
      payload: {},
      status: 404,
    },
  ])(
    'counts requests $what too, on operations that admit in their handler',
    async ({ url, payload, status }) => {
      const { token } = await createCustomer(ctx.container, { plan: 'scale', dailyRequestCap: 3 });
      const headers = { authorization: `Bearer ${token}` };
      const call = () =>
        ctx.app.inject({ method: 'POST', url, headers, payload, remoteAddress: uniqueAddress() });
      for (const remaining of ['2', '1']) {
        const refused = await call();
        expect(refused.statusCode).toBe(status);
        expect(refused.headers['ratelimit-remaining']).toBe(remaining);
      }
      expect((await balance(headers)).headers['ratelimit-remaining']).toBe('0');
      expect((await call()).statusCode).toBe(429);
    },
  );

  it('comes from the plan: Pro 100,000, Scale its custom cap', async () => {
    const pro = await createCustomer(ctx.container, { plan: 'pro' });
    expect((await balance({ authorization: `Bearer ${pro.token}` })).headers['ratelimit-limit']).toBe(
      '100000',
    );
    const scale = await createCustomer(ctx.container, { plan: 'scale', dailyRequestCap: 3 });
    const headers = { authorization: `Bearer ${scale.token}` };
    for (let call = 1; call <= 3; call += 1) expect((await balance(headers)).statusCode).toBe(200);
    expect((await balance(headers)).statusCode).toBe(429);
  });
});
