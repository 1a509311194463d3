import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSIEST_READS_PER_DAY } from '../src/modules/shield/schema.js';
import { verifyShieldTicket } from '../src/modules/shield/verify.js';
import { callWithKey, createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

const BROWSER =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36';

async function shieldApp() {
  const customer = await createCustomer(ctx.container);
  const settings = (await callWithKey(ctx.app, customer.token, 'POST', '/v1/realtime/app')).json();
  return {
    ...customer,
    publishable: settings.publishable_key as string,
    secret: settings.shield_secret as string,
  };
}

const ticket = (key: string, body: object, options: { address?: string; userAgent?: string } = {}) =>
  ctx.app.inject({
    method: 'POST',
    url: '/v1/realtime/shield/ticket',
    headers: {
      'x-publishable-key': key,
      'user-agent': options.userAgent ?? BROWSER,
      origin: 'https://app.example',
    },
    remoteAddress: options.address ?? uniqueAddress(),
    payload: body,
  });

describe('POST /v1/realtime/shield/ticket', () => {
  it('issues a ticket the integrator verifies offline, in Node and in Python', async () => {
    const { publishable, secret, app } = await shieldApp();
    const response = await ticket(publishable, { subject: 'viewer-1', scope: 'stream-9' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['access-control-allow-origin']).toBe('*');
    const issued = response.json();
    expect(issued).toMatchObject({ verdict: 'ok', reason: '', expires_at: expect.any(Number) });
    const now = Math.floor(Date.now() / 1000);
    expect(issued.expires_at - now).toBeGreaterThan(290);
    expect(issued.expires_at - now).toBeLessThanOrEqual(300);

    const verified = verifyShieldTicket(issued.ticket, { secret, subject: 'viewer-1', scope: 'stream-9' });
    expect(verified).toEqual({
      ok: true,
      payload: { a: app.id, s: 'viewer-1', c: 'stream-9', v: 'ok', e: issued.expires_at },
    });

    // An independent implementation: Python's hmac, as the README shows it.
    const python = `
import base64, hashlib, hmac, json, sys
secret, ticket = sys.argv[1], sys.argv[2]
payload, signature = ticket.split('.')
expected = base64.urlsafe_b64encode(hmac.new(secret.encode(), payload.encode(), hashlib.sha256).digest()).rstrip(b'=').decode()
claims = json.loads(base64.urlsafe_b64decode(payload + '=' * (-len(payload) % 4)))
print(json.dumps({"valid": hmac.compare_digest(expected, signature), "s": claims["s"], "v": claims["v"]}))`;
    const output = execFileSync('python3', ['-c', python, secret, issued.ticket], { encoding: 'utf8' });
    expect(JSON.parse(output)).toEqual({ valid: true, s: 'viewer-1', v: 'ok' });
    expect(
      JSON.parse(execFileSync('python3', ['-c', python, `${secret}x`, issued.ticket], { encoding: 'utf8' }))
        .valid,
    ).toBe(false);
  });

  it('is refused by the verifier for each wrong thing', async () => {
    const { publishable, secret } = await shieldApp();
    const issued = (await ticket(publishable, { subject: 's', scope: 'c' })).json();
    const [payload, signature] = issued.ticket.split('.');
    const expect_ = { secret, subject: 's', scope: 'c' };
    expect(verifyShieldTicket(`${payload}.${signature.slice(0, -2)}AA`, expect_)).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
    expect(verifyShieldTicket(issued.ticket, { ...expect_, secret: 'other' })).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
    expect(verifyShieldTicket(issued.ticket, { ...expect_, subject: 't' })).toEqual({
      ok: false,
      reason: 'other_subject',
    });
    expect(verifyShieldTicket(issued.ticket, { ...expect_, scope: 'd' })).toEqual({
      ok: false,
      reason: 'other_scope',
    });
    expect(verifyShieldTicket(issued.ticket, { ...expect_, nowSeconds: issued.expires_at })).toEqual({
      ok: false,
      reason: 'expired',
    });
    expect(verifyShieldTicket('garbage', expect_)).toEqual({ ok: false, reason: 'malformed' });
    const bot = (await ticket(publishable, { subject: 's', scope: 'c' }, { userAgent: 'curl/8.5.0' })).json();
    expect(bot.verdict).toBe('bot');
    expect(verifyShieldTicket(bot.ticket, expect_)).toEqual({ ok: false, reason: 'not_ok' });
  });

  it('turns suspicious past 6 viewers and block past 20, per address and scope', async () => {
    const { publishable } = await shieldApp();
    const address = uniqueAddress();
    const verdictOf = async (viewer: number, scope = 'live-1') =>
      (await ticket(publishable, { subject: `viewer-${viewer}`, scope }, { address })).json().verdict;
    for (let viewer = 1; viewer <= 6; viewer += 1)
      expect(await verdictOf(viewer), `viewer ${viewer}`).toBe('ok');
    expect(await verdictOf(1)).toBe('ok');
    expect(await verdictOf(7)).toBe('suspicious');
    for (let viewer = 8; viewer <= 20; viewer += 1) expect(await verdictOf(viewer)).toBe('suspicious');
    expect(await verdictOf(21)).toBe('block');
    expect(await verdictOf(1, 'another-scope')).toBe('ok');
  });

  it('calls automation by its user agent a bot', async () => {
    const { publishable } = await shieldApp();
    for (const agent of [
      'Mozilla/5.0 HeadlessChrome/126.0',
      'python-requests/2.31',
      'Googlebot/2.1',
      'node-fetch/1.0',
    ]) {
      expect(
        (await ticket(publishable, { subject: 's', scope: 'c' }, { userAgent: agent })).json().verdict,
        agent,
      ).toBe('bot');
    }
  });

  it('answers the 121st ticket in a minute from one address with 429 and no ticket', async () => {
    const { publishable } = await shieldApp();
    const address = uniqueAddress();
    for (let i = 1; i <= 120; i += 1) {
      expect((await ticket(publishable, { subject: `s${i % 5}`, scope: 'c' }, { address })).statusCode).toBe(
        200,
      );
    }
    const over = await ticket(publishable, { subject: 's', scope: 'c' }, { address });
    expect(over.statusCode).toBe(429);
    expect(over.json()).toEqual({
      error: { type: 'rate_limited', message: expect.stringMatching(/120 tickets a minute/) },
    });
  });

  it('refuses a secret key in X-Publishable-Key, and a missing key', async () => {
    const { token } = await shieldApp();
    const secret = await ticket(token, { subject: 's', scope: 'c' });
    expect(secret.statusCode).toBe(401);
    expect(secret.json().error.message).toMatch(/secret key .* must never be sent from a client/);
    expect((await ticket('', { subject: 's', scope: 'c' })).json().error.message).toMatch(
      /X-Publishable-Key/,
    );
  });

  it('validates subject and scope, and answers CORS preflights', async () => {
    const { publishable } = await shieldApp();
    for (const body of [
      { scope: 'c' },
      { subject: 's' },
      { subject: '', scope: 'c' },
      { subject: 's'.repeat(257), scope: 'c' },
    ]) {
      expect((await ticket(publishable, body)).statusCode).toBe(422);
    }
    const preflight = await ctx.app.inject({
      method: 'OPTIONS',
      url: '/v1/realtime/shield/ticket',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe('*');
    expect(preflight.headers['access-control-allow-headers']).toMatch(/x-publishable-key/);
  });
});

describe('GET /v1/realtime/shield/report', () => {
  it('counts verdicts and ranks the busiest addresses, hashed, never raw', async () => {
    const { publishable, token } = await shieldApp();
    const busy = uniqueAddress();
    for (let viewer = 1; viewer <= 8; viewer += 1)
      await ticket(publishable, { subject: `v${viewer}`, scope: 'show' }, { address: busy });
    await ticket(publishable, { subject: 'x', scope: 'show' }, { userAgent: 'curl/8' });
    const report = await callWithKey(ctx.app, token, 'GET', '/v1/realtime/shield/report?days=30');
    expect(report.statusCode).toBe(200);
    const body = report.json();
    expect(body.verdicts).toEqual({ ok: 6, suspicious: 2, bot: 1, block: 0 });
    expect(body.busiest_addresses[0]).toEqual({
      scope: 'show',
      address: expect.stringMatching(/^[0-9a-f]{12}$/),
      viewers: 8,
      hits: 8,
    });
    expect(report.body).not.toContain(busy);
    for (const days of [0, 31])
      expect(
        (await callWithKey(ctx.app, token, 'GET', `/v1/realtime/shield/report?days=${days}`)).statusCode,
      ).toBe(422);
  });

  it('adds up the days it covers: verdicts and hits summed, viewers the most of any one day', async () => {
    const { publishable, token, app } = await shieldApp();
    const busy = uniqueAddress();
    for (let viewer = 1; viewer <= 8; viewer += 1)
      await ticket(publishable, { subject: `v${viewer}`, scope: 'show' }, { address: busy });
    const report = async (days: number) =>
      (await callWithKey(ctx.app, token, 'GET', `/v1/realtime/shield/report?days=${days}`)).json();
    const today = await report(1);
    const hashed = today.busiest_addresses[0].address as string;
    // Yesterday's counters, as its tickets would have left them: 12 viewers of the same show and
    // address, 4 hits, and verdicts of its own.
    const base = `svc:shield:${app.id}:test`;
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    await ctx.container.redis.hset(`${base}:verdicts:${yesterday}`, { ok: 5, block: 1 });
    await ctx.container.redis.zadd(`${base}:hits:${yesterday}`, 4, `show\t${hashed}`);
    await ctx.container.redis.sadd(
      `${base}:viewers:${yesterday}:show:${hashed}`,
      ...Array.from({ length: 12 }, (_, viewer) => `y${viewer}`),
    );

    expect(await report(2)).toEqual({
      verdicts: { ok: 11, suspicious: 2, bot: 0, block: 1 },
      busiest_addresses: [{ scope: 'show', address: hashed, viewers: 12, hits: 12 }],
    });
    expect(await report(1)).toEqual(today);
    expect(today).toEqual({
      verdicts: { ok: 6, suspicious: 2, bot: 0, block: 0 },
      busiest_addresses: [{ scope: 'show', address: hashed, viewers: 8, hits: 8 }],
    });
  });

  /** Today's and yesterday's dates as the shield's day keys name them. */
  const lastTwoDays = () =>
    [0, 1].map((ago) => new Date(Date.now() - ago * 86_400_000).toISOString().slice(0, 10)) as [
      string,
      string,
    ];
  /** `count` (scope, address) pairs of the scope `show` with `hits` each, as ZADD takes them. */
  const showPairs = (letter: string, count: number, hits: number) =>
    Array.from({ length: count }, (_, i) => [hits, `show\t${letter}${String(i).padStart(11, '0')}`]).flat();

  it('ranks by every day’s hits while reading only each day’s busiest', async () => {
    const { token, app } = await shieldApp();
    const base = `svc:shield:${app.id}:test`;
    const [today, yesterday] = lastTwoDays();
    // A scope may hold a tab: the address is what follows the last one.
    const quiet = { scope: 'late\tshow', address: 'aaaaaaaaaaaa' };
    const member = `${quiet.scope}\t${quiet.address}`;
    // Today: the quiet address 11th with 50 hits, behind ten with 52.
    await ctx.container.redis.zadd(`${base}:hits:${today}`, 50, member, ...showPairs('b', 10, 52));
    // Yesterday: its 5 hits among more pairs with as many than a report reads of a day, and last of
    // them as Redis orders equal hits: only looking it up finds them.
    await ctx.container.redis.zadd(
      `${base}:hits:${yesterday}`,
      5,
      member,
      ...showPairs('f', BUSIEST_READS_PER_DAY[0] + 100, 5),
    );
    await ctx.container.redis.sadd(
      `${base}:viewers:${yesterday}:${quiet.scope}:${quiet.address}`,
      'v1',
      'v2',
      'v3',
    );
    const report = (await callWithKey(ctx.app, token, 'GET', '/v1/realtime/shield/report?days=2')).json();
    expect(report.busiest_addresses).toHaveLength(10);
    expect(report.busiest_addresses[0]).toEqual({ ...quiet, viewers: 3, hits: 55 });
    for (const busy of report.busiest_addresses.slice(1)) expect(busy).toMatchObject({ hits: 52 });
  });

  it('reads each day deeper once when its first read cannot rank exactly, and counts verdicts once', async () => {
    const { token, app } = await shieldApp();
    const base = `svc:shield:${app.id}:test`;
    const [today, yesterday] = lastTwoDays();
    // Yesterday's first read leaves the c pairs out (at most 50) and today's leaves o0 (60) and p0-p9
    // (30) out: the p pairs can have the most and are completed, p0-p9 with 110; the c pairs, read
    // today only, have 120 (busiest.test.ts has the same days).
    await ctx.container.redis.zadd(
      `${base}:hits:${yesterday}`,
      ...showPairs('p', 100, 80),
      ...showPairs('m', 100, 50),
      ...showPairs('c', 10, 50),
    );
    await ctx.container.redis.zadd(
      `${base}:hits:${today}`,
      ...showPairs('c', 10, 70),
      ...showPairs('q', 190, 60),
      ...showPairs('o', 1, 60),
      ...showPairs('p', 10, 30),
    );
    await ctx.container.redis.hset(`${base}:verdicts:${yesterday}`, { ok: 3 });
    await ctx.container.redis.hset(`${base}:verdicts:${today}`, { ok: 4, bot: 1 });
    const report = (await callWithKey(ctx.app, token, 'GET', '/v1/realtime/shield/report?days=2')).json();
    expect(report.verdicts).toEqual({ ok: 7, suspicious: 0, bot: 1, block: 0 });
    expect(
      report.busiest_addresses.map((busy: { address: string; hits: number }) => [busy.address, busy.hits]),
    ).toEqual(Array.from({ length: 10 }, (_, i) => [`c${String(i).padStart(11, '0')}`, 120]));
  });

  it('keeps a day’s counters 32 days from its first ticket, whatever comes after', async () => {
    const { publishable, app } = await shieldApp();
    const address = uniqueAddress();
    const dayKeys = async () => (await ctx.container.redis.keys(`svc:shield:${app.id}:test:*`)).sort();
    /** When each key expires, in ms since the epoch, as Redis tells it. */
    const expiries = async (keys: string[]) => {
      const now = Date.now();
      return (await Promise.all(keys.map((key) => ctx.container.redis.pttl(key)))).map((left) => now + left);
    };
    await ticket(publishable, { subject: 'v1', scope: 'show' }, { address });
    const keys = await dayKeys();
    // The viewers of (scope, address), the hits and the verdicts of the day.
    expect(keys).toHaveLength(3);
    const first = await expiries(keys);
    for (const at of first) {
      expect(at - Date.now()).toBeGreaterThan(32 * 86_400_000 - 60_000);
      expect(at - Date.now()).toBeLessThanOrEqual(32 * 86_400_000);
    }
    // Set again, the expiry would move a second later.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await ticket(publishable, { subject: 'v2', scope: 'show' }, { address });
    expect(await dayKeys()).toEqual(keys);
    const later = await expiries(keys);
    for (const [i, at] of later.entries()) expect(Math.abs(at - first[i]!)).toBeLessThan(300);
  });
});
