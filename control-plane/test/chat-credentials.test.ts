import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { READABLE_NAMES, REAL_APP_IDS, REFUSED_APP_IDS, REFUSED_NAMES } from './identities.js';
import { callWithKey, createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

const call = (method: 'POST' | 'PATCH' | 'DELETE', url: string, token: string, payload?: object) =>
  callWithKey(ctx.app, token, method, url, payload);

/** ejabberd's question as its auth method sends it. */
const ask = (body: object, secret = ctx.container.settings.SVC_EJABBERD_AUTH_SECRET) =>
  ctx.internal.inject({
    method: 'POST',
    url: '/internal/ejabberd/auth',
    headers: { authorization: `Bearer ${secret}` },
    payload: body,
  });

const login = async (user: string, password: string) =>
  (await ask({ op: 'auth', user, server: 'chat.local', password })).json().ok as boolean;

describe('POST /v1/realtime/chat/tokens', () => {
  it('mints a credential scoped to the app', async () => {
    ctx.clock.set('2036-04-01T10:00:00Z');
    const { token } = await createCustomer(ctx.container);
    const response = await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'ana-1', name: 'Ana' });
    expect(response.statusCode).toBe(200);
    const credential = response.json();
    const prefix = credential.room_prefix.slice(0, -1);
    expect(prefix).toMatch(/^[a-z0-9]{10}$/);
    expect(credential).toEqual({
      jid: `${prefix}.ana-1@chat.local`,
      user: `${prefix}.ana-1`,
      domain: 'chat.local',
      password: expect.stringMatching(/^[0-9A-Za-z]{32}$/),
      ws: ctx.container.settings.SVC_CHAT_WS_URL,
      muc: 'conference.chat.local',
      room_prefix: `${prefix}.`,
      nickname: 'Ana',
      mam: false,
      expires_at: '2036-04-01T16:00:00.000Z',
    });
    expect(response.headers['x-svc-cost-usd']).toBe('0.000000');
    ctx.clock.set(new Date());
  });

  it('takes ttl_seconds from 60 to 86,400', async () => {
    const { token } = await createCustomer(ctx.container);
    for (const ttl of [60, 86_400]) {
      expect(
        (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'u', ttl_seconds: ttl }))
          .statusCode,
      ).toBe(200);
    }
    for (const [ttl, message] of [
      [59, 'must be >= 60'],
      [86_401, 'must be <= 86400'],
    ] as const) {
      const response = await call('POST', '/v1/realtime/chat/tokens', token, {
        user_id: 'u',
        ttl_seconds: ttl,
      });
      expect(response.statusCode).toBe(422);
      expect(response.json().error.fields).toEqual([{ in: 'body', field: 'ttl_seconds', message }]);
    }
  });

  it.each([['missing', undefined], ...Object.entries(REFUSED_APP_IDS)])(
    'refuses a user_id %s with 422',
    async (_case, userId) => {
      const { token } = await createCustomer(ctx.container);
      const response = await call(
        'POST',
        '/v1/realtime/chat/tokens',
        token,
        userId === undefined ? {} : { user_id: userId },
      );
      expect(response.statusCode).toBe(422);
      expect(response.json().error.fields[0]).toMatchObject({ in: 'body', field: 'user_id' });
    },
  );

  it('says what a user_id may hold when it refuses one', async () => {
    const { token } = await createCustomer(ctx.container);
    const response = await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'ana\u202Etxt' });
    expect(response.json().error.fields).toEqual([
      {
        in: 'body',
        field: 'user_id',
        message: expect.stringMatching(/^must be 1-128 bytes .*no control, bidi/),
      },
    ]);
  });

  it.each(Object.entries(REAL_APP_IDS))(
    'accepts %s as user_id, under a JID of its own that logs in',
    async (_kind, userId) => {
      const { token } = await createCustomer(ctx.container);
      const response = await call('POST', '/v1/realtime/chat/tokens', token, { user_id: userId });
      expect(response.statusCode).toBe(200);
      const credential = response.json();
      expect(credential.user).toMatch(/^[a-z0-9]{10}\.~[a-z2-7]+$/);
      expect(credential.jid).toBe(`${credential.user}@chat.local`);
      expect(credential.nickname).toBe(userId);
      expect(await login(credential.user, credential.password)).toBe(true);
    },
  );

  it('encodes an id that is not a plain node as "~" and the base32 of its UTF-8', async () => {
    const { token } = await createCustomer(ctx.container);
    const credential = (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'Alice' })).json();
    // RFC 4648 base32 of "Alice", lowercase and unpadded: what the docs tell apps to expect.
    expect(credential.user).toBe(`${credential.room_prefix}~ifwgsy3f`);
  });

  it('gives ids that differ only by case JIDs, passwords and revocations of their own', async () => {
    const { token } = await createCustomer(ctx.container);
    const mint = async (userId: string) =>
      (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: userId })).json();
    for (const [upper, lower] of [
      ['Alice', 'alice'],
      ['3F2504E0-4F89-41D3-9A0C-0305E82C3301', '3f2504e0-4f89-41d3-9a0c-0305e82c3301'],
    ] as const) {
      const [first, second] = [await mint(upper), await mint(lower)];
      expect(first.jid).not.toBe(second.jid);
      expect(first.jid.toLowerCase()).not.toBe(second.jid.toLowerCase());
      expect(await login(first.user, first.password)).toBe(true);
      expect(await login(second.user, second.password)).toBe(true);
      expect(await login(first.user, second.password)).toBe(false);

      const revoked = await call('DELETE', `/v1/realtime/chat/tokens/${encodeURIComponent(upper)}`, token);
      expect(revoked.json()).toMatchObject({ ok: true, id: upper, jid: first.jid, revoked: true });
      expect(await login(first.user, first.password)).toBe(false);
      expect(await login(second.user, second.password)).toBe(true);
    }
  });

  it('revokes an id that needs percent-encoding in the path, up to 128 bytes', async () => {
    const { token } = await createCustomer(ctx.container);
    for (const userId of ['Ana.Lopez+chat@example.com', 'a/b?c#d', 'x'.repeat(128), '😀'.repeat(32)]) {
      const credential = (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: userId })).json();
      const revoked = await call('DELETE', `/v1/realtime/chat/tokens/${encodeURIComponent(userId)}`, token);
      expect(revoked.statusCode, userId).toBe(200);
      expect(revoked.json()).toMatchObject({ id: userId, jid: credential.jid, revoked: true });
    }
  });

  it('accepts a 128-byte user_id and a 64-character name, not more', async () => {
    const { token } = await createCustomer(ctx.container);
    const ok = await call('POST', '/v1/realtime/chat/tokens', token, {
      user_id: 'b'.repeat(128),
      name: 'n'.repeat(64),
    });
    expect(ok.statusCode).toBe(200);
    const long = await call('POST', '/v1/realtime/chat/tokens', token, {
      user_id: 'b',
      name: 'n'.repeat(65),
    });
    expect(long.json().error.fields).toEqual([
      { in: 'body', field: 'name', message: 'must NOT have more than 64 characters' },
    ]);
  });

  it.each(Object.entries(REFUSED_NAMES))('refuses a name with %s', async (_case, name) => {
    const { token } = await createCustomer(ctx.container);
    const response = await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'u', name });
    expect(response.statusCode).toBe(422);
    // Half a character is refused as the body is read, before the name's own rule.
    expect(response.json().error.fields).toEqual([
      { in: 'body', field: 'name', message: expect.stringMatching(/bidi-control|whole characters/) },
    ]);
  });

  it('takes a name of any script, emoji sequences included', async () => {
    const { token } = await createCustomer(ctx.container);
    for (const name of READABLE_NAMES) {
      const response = await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'u', name });
      expect(response.json().nickname).toBe(name);
    }
  });

  it('answers 402 to a live key on an empty balance, and 403 when chat is switched off', async () => {
    const live = await createCustomer(ctx.container, { mode: 'live' });
    const refused = await call('POST', '/v1/realtime/chat/tokens', live.token, { user_id: 'u' });
    expect(refused.statusCode).toBe(402);
    expect(refused.json().error.code).toBe('PAYMENT_REQUIRED');
    await ctx.container.billing.topUp({ accountId: live.account.id, amountMicros: 1, reference: 'r' });
    expect((await call('POST', '/v1/realtime/chat/tokens', live.token, { user_id: 'u' })).statusCode).toBe(
      200,
    );

    await call('PATCH', '/v1/realtime/app', live.token, { products: ['live', 'calls'] });
    const off = await call('POST', '/v1/realtime/chat/tokens', live.token, { user_id: 'u' });
    expect(off.statusCode).toBe(403);
    expect(off.json().error).toMatchObject({ type: 'permission_error', code: 'PRODUCT_DISABLED' });
    expect((await call('POST', '/v1/realtime/chat/rooms', live.token, { room: 'r' })).statusCode).toBe(403);
  });
});

describe('the login callback', () => {
  it('refuses a caller without ejabberd’s own secret, and is not served on the public listener', async () => {
    const question = { op: 'isuser', user: 'x.y', server: 'chat.local' };
    expect((await ask(question, 'wrong')).statusCode).toBe(401);
    // MinIO's secret is MinIO's: it opens no other caller's door.
    expect((await ask(question, ctx.container.settings.SVC_MINIO_WEBHOOK_SECRET)).statusCode).toBe(401);
    const publicly = await ctx.app.inject({
      method: 'POST',
      url: '/internal/ejabberd/auth',
      headers: { authorization: `Bearer ${ctx.container.settings.SVC_EJABBERD_AUTH_SECRET}` },
      payload: question,
    });
    expect(publicly.statusCode).toBe(404);
    expect(publicly.json().error.type).toBe('not_found');
    const none = await ctx.internal.inject({
      method: 'POST',
      url: '/internal/ejabberd/auth',
      payload: { op: 'isuser' },
    });
    expect(none.statusCode).toBe(401);
  });

  it('limits wrong internal secrets per address, and still lets the right one through', async () => {
    const address = uniqueAddress();
    const askFrom = (secret: string) =>
      ctx.internal.inject({
        method: 'POST',
        url: '/internal/ejabberd/auth',
        headers: { authorization: `Bearer ${secret}` },
        remoteAddress: address,
        payload: { op: 'isuser', user: 'x.y', server: 'chat.local' },
      });
    for (let attempt = 1; attempt <= 20; attempt += 1)
      expect((await askFrom(`wrong-${attempt}`)).statusCode, `attempt ${attempt}`).toBe(401);
    expect((await askFrom('wrong-21')).statusCode).toBe(429);
    expect((await askFrom(ctx.container.settings.SVC_EJABBERD_AUTH_SECRET)).statusCode).toBe(200);
  });

  it('accepts the current password only: a replaced one, a revoked one and an expired one are refused', async () => {
    const { token } = await createCustomer(ctx.container);
    const mint = async (ttl = 3_600) =>
      (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'bo', ttl_seconds: ttl })).json();
    const first = await mint();
    expect(await login(first.user, first.password)).toBe(true);
    expect(await login(first.user, `${first.password}x`)).toBe(false);
    expect(await login(first.user.toUpperCase(), first.password)).toBe(true);

    const second = await mint();
    expect(await login(first.user, first.password)).toBe(false);
    expect(await login(second.user, second.password)).toBe(true);

    const revoked = await call('DELETE', '/v1/realtime/chat/tokens/bo', token);
    expect(revoked.statusCode).toBe(200);
    expect(revoked.json()).toEqual({
      ok: true,
      id: 'bo',
      jid: second.jid,
      revoked: true,
      sessions_closed: 0,
    });
    expect(await login(second.user, second.password)).toBe(false);
    expect((await call('DELETE', '/v1/realtime/chat/tokens/bo', token)).json().revoked).toBe(false);

    const third = await mint(60);
    expect(await login(third.user, third.password)).toBe(true);
    ctx.clock.advance(60_000);
    expect(await login(third.user, third.password)).toBe(false);
    ctx.clock.set(new Date());
  });

  it('answers isuser for users given a credential, and nothing for other domains', async () => {
    const { token } = await createCustomer(ctx.container);
    const credential = (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'cy' })).json();
    const isUser = async (user: string, server = 'chat.local') =>
      (await ask({ op: 'isuser', user, server })).json().ok as boolean;
    expect(await isUser(credential.user)).toBe(true);
    expect(await isUser(`${credential.room_prefix}nobody`)).toBe(false);
    expect(await isUser('nodot')).toBe(false);
    expect(await isUser(credential.user, 'bench.local')).toBe(false);
    expect(
      (
        await ask({ op: 'auth', user: credential.user, server: 'other', password: credential.password })
      ).json().ok,
    ).toBe(false);
  });

  it('counts one monthly active user per user per month, however often they log in', async () => {
    ctx.clock.set('2036-05-20T08:00:00Z');
    const { token, account } = await createCustomer(ctx.container);
    const ana = (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'ana' })).json();
    const bo = (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'bo' })).json();
    for (let i = 0; i < 5; i += 1) expect(await login(ana.user, ana.password)).toBe(true);
    expect(await login(bo.user, bo.password)).toBe(true);
    await ctx.container.accrual.flush();
    const usage = await ctx.container.billing.usageReport(account.id, 'test', 1);
    expect(usage.usage).toEqual([
      expect.objectContaining({ product: 'chat', metric: 'monthly_active_users', quantity: 2 }),
    ]);
    ctx.clock.set(new Date());
  });

  it('charges users past the free ones in full, and refuses every login while the live balance is empty', async () => {
    const priced = await startTestApp({ settings: { SVC_FREE_ALLOWANCES: 'chat.monthly_active_users=1' } });
    try {
      priced.clock.set('2036-08-15T12:00:00Z');
      const live = await createCustomer(priced.container, { mode: 'live', balanceMicros: 5_000 });
      const mint = async (userId: string) =>
        (
          await callWithKey(priced.app, live.token, 'POST', '/v1/realtime/chat/tokens', { user_id: userId })
        ).json();
      const auth = async (credential: { user: string; password: string }) =>
        (
          await priced.internal.inject({
            method: 'POST',
            url: '/internal/ejabberd/auth',
            headers: { authorization: `Bearer ${priced.container.settings.SVC_EJABBERD_AUTH_SECRET}` },
            payload: {
              op: 'auth',
              user: credential.user,
              server: 'chat.local',
              password: credential.password,
            },
          })
        ).json().ok;
      const balance = async () => {
        await priced.container.accrual.flush();
        return priced.container.billing.getBalance(live.account.id);
      };
      const [ana, bo, cy] = [await mint('ana'), await mint('bo'), await mint('cy')];

      expect(await auth(ana)).toBe(true);
      expect((await balance()).balance_micros).toBe(5_000);
      // The second user is past the free one: $0.01, charged in full although the balance holds less.
      expect(await auth(bo)).toBe(true);
      expect(await balance()).toMatchObject({ balance_micros: -5_000, owed_micros: 5_000 });
      // At zero or below, every login is refused: new users and users already counted alike.
      expect(await auth(cy)).toBe(false);
      expect(await auth(ana)).toBe(false);
      expect(
        (await callWithKey(priced.app, live.token, 'POST', '/v1/realtime/chat/tokens', { user_id: 'dee' }))
          .statusCode,
      ).toBe(402);

      // A top-up repays what is owed first; logins work again at once.
      await priced.container.billing.topUp({
        accountId: live.account.id,
        amountMicros: 20_000,
        reference: 'r',
      });
      expect(await auth(cy)).toBe(true);
      expect(await auth(ana)).toBe(true);
      const after = await balance();
      expect(after).toMatchObject({ balance_micros: 5_000, owed_micros: 0 });
      expect(after.ledger.reduce((sum, entry) => sum + entry.amount_micros, 0)).toBe(5_000);
      const usage = await priced.container.billing.usageReport(live.account.id, 'live', 1);
      expect(usage.usage).toEqual([
        expect.objectContaining({ product: 'chat', quantity: 3, billable_quantity: 2, cost_micros: 20_000 }),
      ]);

      // A new month counts everyone again.
      priced.clock.set('2036-09-01T00:00:10Z');
      expect(await auth(await mint('ana'))).toBe(true);
      expect((await balance()).balance_micros).toBe(5_000);
      expect((await priced.container.billing.usageReport(live.account.id, 'live', 1)).usage).toEqual([
        expect.objectContaining({ day: '2036-09-01', product: 'chat', quantity: 1, cost_micros: 0 }),
      ]);
    } finally {
      await priced.close();
    }
  });
});

describe('the login callback with ids that are not plain nodes', () => {
  it('knows the user and counts the app’s own id as the monthly active user, not its node', async () => {
    ctx.clock.set('2036-06-10T08:00:00Z');
    const { token, app } = await createCustomer(ctx.container);
    const mint = async (userId: string) =>
      (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: userId })).json();
    const [upper, lower] = [await mint('Alice'), await mint('alice')];
    expect((await ask({ op: 'isuser', user: upper.user, server: 'chat.local' })).json().ok).toBe(true);
    expect(await login(upper.user, upper.password)).toBe(true);
    expect(await login(lower.user, lower.password)).toBe(true);
    await ctx.container.accrual.flush();
    const counted = await ctx.container.pool.anyFirst(
      sql.type(z.object({ user_id: z.string() }))`
        select user_id from chat_monthly_active_users where app_id = ${app.id} order by user_id`,
    );
    expect(counted).toEqual(['Alice', 'alice']);
    ctx.clock.set(new Date());
  });

  it('refuses a node that is not the one its id is minted under', async () => {
    const { token } = await createCustomer(ctx.container);
    const ana = (await call('POST', '/v1/realtime/chat/tokens', token, { user_id: 'ana' })).json();
    // "~" and the base32 of "ana": decodes to ana, but ana's node is plain.
    const encodedAna = `${ana.room_prefix}~mfxgc`;
    expect(await login(encodedAna, ana.password)).toBe(false);
    expect((await ask({ op: 'isuser', user: encodedAna, server: 'chat.local' })).json().ok).toBe(false);
  });
});
