/**
 * User tokens against the real PostgreSQL and Redis: minted with a secret key, verified by the
 * service on /v1/me/… and by an app's backend with jose's remote JWKS set, refused everywhere else,
 * revoked on every replica, and signed by keys that rotate with an overlap.
 */
import { createRemoteJWKSet, decodeProtectedHeader, importPKCS8, jwtVerify, SignJWT } from 'jose';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PUBLISH_AHEAD_MS, PUBLISHED_AFTER_RETIREMENT_MS } from '../src/modules/users/schema.js';
import { callWithKey, createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

let ctx: TestContext;
let other: TestContext;
let baseUrl: string;

beforeAll(async () => {
  ctx = await startTestApp();
  other = await startTestApp({ clock: ctx.clock });
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  const address = ctx.app.server.address() as { port: number };
  baseUrl = `http://127.0.0.1:${address.port}`;
});
afterAll(async () => {
  await other.close();
  await ctx.close();
});

async function mint(token: string, userId: string, body: object = {}, on = ctx) {
  return callWithKey(on.app, token, 'POST', `/v1/users/${encodeURIComponent(userId)}/tokens`, body);
}

async function userToken(token: string, userId: string) {
  const response = await mint(token, userId);
  expect(response.statusCode).toBe(200);
  return response.json().token as string;
}

function asUser(userToken: string, method: 'GET' | 'PUT' = 'GET', url = '/v1/me/search?q=x', on = ctx) {
  return on.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${userToken}` },
    remoteAddress: uniqueAddress(),
  });
}

describe('minting', () => {
  it('mints a token for the ttl asked, 60 to 86,400 seconds, for free', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live' });
    const minted = await mint(customer.token, 'Ada Lovelace');
    expect(minted.statusCode).toBe(200);
    expect(minted.headers['x-svc-cost-usd']).toBe('0.000000');
    const body = minted.json();
    expect(body).toMatchObject({ token_type: 'Bearer', user_id: 'Ada Lovelace', expires_in: 3600 });
    expect(Date.parse(body.expires_at) - ctx.clock.now().getTime()).toBeGreaterThan(3_598_000);

    for (const [ttl, status] of [
      [59, 422],
      [60, 200],
      [86_400, 200],
      [86_401, 422],
    ] as const) {
      const response = await mint(customer.token, 'ada', { ttl_seconds: ttl });
      expect(response.statusCode, `ttl ${ttl}`).toBe(status);
      if (status === 200) expect(response.json().expires_in).toBe(ttl);
    }
  });

  it('refuses a user id outside the id rule', async () => {
    const customer = await createCustomer(ctx.container);
    expect((await mint(customer.token, 'bad\u202eid')).statusCode).toBe(422);
  });
});

describe('verification by an app’s backend', () => {
  it('verifies with the JWKS fetched from the service: issuer, audience, subject, mode', async () => {
    const customer = await createCustomer(ctx.container);
    const token = await userToken(customer.token, 'user-42');
    const jwks = createRemoteJWKSet(new URL(`${baseUrl}/.well-known/jwks.json`));
    const { payload, protectedHeader } = await jwtVerify(token, jwks, {
      issuer: ctx.container.settings.SVC_PUBLIC_URL,
      audience: customer.app.id,
      currentDate: ctx.clock.now(),
    });
    expect(protectedHeader.alg).toBe('ES256');
    expect(payload).toMatchObject({ sub: 'user-42', mode: 'test', aud: customer.app.id });
    expect(typeof payload.jti).toBe('string');
    expect(payload.exp! - payload.iat!).toBe(3600);
    await expect(
      jwtVerify(token, jwks, { audience: 'app_someoneelse', currentDate: ctx.clock.now() }),
    ).rejects.toThrow();
  });
});

describe('who may call what', () => {
  it('takes a user token on /v1/me and refuses secret keys there, and user tokens on key endpoints', async () => {
    const customer = await createCustomer(ctx.container);
    const token = await userToken(customer.token, 'someone');
    expect((await asUser(token)).statusCode).toBe(200);

    const withKey = await asUser(customer.token);
    expect(withKey.statusCode).toBe(401);
    expect(withKey.json().error.message).toMatch(/API keys are not accepted on \/v1\/me/);

    const onKeyEndpoint = await callWithKey(ctx.app, token, 'GET', '/v1/realtime/balance');
    expect(onKeyEndpoint.statusCode).toBe(401);
    expect(onKeyEndpoint.json().error.message).toMatch(/user tokens are accepted only on \/v1\/me/);

    const none = await ctx.app.inject({
      method: 'GET',
      url: '/v1/me/search?q=x',
      remoteAddress: uniqueAddress(),
    });
    expect(none.statusCode).toBe(401);
  });

  it('refuses expired, forged, wrong-app and wrong-mode tokens', async () => {
    const customer = await createCustomer(ctx.container);
    const otherApp = await createCustomer(ctx.container);
    const short = (await mint(customer.token, 'u1', { ttl_seconds: 60 })).json().token as string;
    const token = await userToken(customer.token, 'u1');

    // A changed payload under the same signature.
    const [header, payload, signature] = token.split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    const altered = Buffer.from(JSON.stringify({ ...claims, sub: 'u2' })).toString('base64url');
    const forged = await asUser(`${header}.${altered}.${signature}`);
    expect(forged.statusCode).toBe(401);
    expect(forged.json().error.message).toMatch(/do not verify/);

    // Signed with the service's own key, but claiming another app or mode than the minting key's.
    const { kid } = decodeProtectedHeader(token);
    const row = await ctx.container.pool.one(
      sql.unsafe`select private_key_sealed from user_token_keys where kid = ${kid!}`,
    );
    const privateKey = await importPKCS8(
      ctx.container.sealer.open(row.private_key_sealed as Buffer, `user-token-key:${kid}`),
      'ES256',
    );
    const sign = (overrides: Record<string, unknown>) =>
      new SignJWT({ ...claims, ...overrides })
        .setProtectedHeader({ alg: 'ES256', kid: kid!, typ: 'JWT' })
        .sign(privateKey);
    expect((await asUser(await sign({ aud: otherApp.app.id }))).statusCode).toBe(401);
    expect((await asUser(await sign({ mode: 'live' }))).statusCode).toBe(401);
    expect((await asUser(await sign({ iss: 'https://elsewhere.example' }))).statusCode).toBe(401);
    expect((await asUser(await sign({}))).statusCode).toBe(200);

    ctx.clock.advance(61_000);
    try {
      const expired = await asUser(short);
      expect(expired.statusCode).toBe(401);
      expect(expired.json().error.message).toMatch(/expired/);
      expect((await asUser(token)).statusCode).toBe(200);
    } finally {
      ctx.clock.advance(-61_000);
    }
  });

  it('never locks an address out for bad user tokens: they guess nothing, and neighbours share it', async () => {
    const customer = await createCustomer(ctx.container);
    const token = await userToken(customer.token, 'u1');
    const address = uniqueAddress();
    const from = (authorization: string, url = '/v1/me/search?q=x') =>
      ctx.app.inject({ method: 'GET', url, headers: { authorization }, remoteAddress: address });
    for (let i = 0; i < 25; i += 1) expect((await from('Bearer undefined')).statusCode).toBe(401);
    expect((await from(`Bearer ${token}`)).statusCode).toBe(200);
    expect((await from(`Bearer ${customer.token}`, '/v1/realtime/balance')).statusCode).toBe(200);
  });

  it('refuses the tokens of a revoked key', async () => {
    const customer = await createCustomer(ctx.container);
    const token = await userToken(customer.token, 'u1');
    await ctx.container.accounts.revokeKey(customer.key.id);
    const refused = await asUser(token);
    expect(refused.statusCode).toBe(401);
    expect(refused.json().error.message).toMatch(/key that minted it has been revoked/);
  });
});

describe('revocation', () => {
  it('refuses every earlier token of the user on every replica within a second; later ones work', async () => {
    const customer = await createCustomer(ctx.container);
    const first = await userToken(customer.token, 'revoked-user');
    const bystander = await userToken(customer.token, 'bystander');
    // The other replica has the user's generation cached before the revocation.
    expect((await asUser(first, 'GET', '/v1/me/search?q=x', other)).statusCode).toBe(200);

    const revoked = await callWithKey(ctx.app, customer.token, 'DELETE', '/v1/users/revoked-user/tokens');
    expect(revoked.statusCode).toBe(200);
    expect(revoked.json()).toMatchObject({ ok: true, id: 'revoked-user' });

    expect((await asUser(first)).statusCode).toBe(401);
    await expect
      .poll(async () => (await asUser(first, 'GET', '/v1/me/search?q=x', other)).statusCode, {
        timeout: 1_000,
        interval: 20,
      })
      .toBe(401);
    expect((await asUser(bystander, 'GET', '/v1/me/search?q=x', other)).statusCode).toBe(200);

    const second = await userToken(customer.token, 'revoked-user');
    expect((await asUser(second)).statusCode).toBe(200);
    expect((await asUser(second, 'GET', '/v1/me/search?q=x', other)).statusCode).toBe(200);
  });
});

describe('signing key rotation', () => {
  it('publishes the next key before it signs and keeps the old one until its tokens expire', async () => {
    const customer = await createCustomer(ctx.container);
    const before = await userToken(customer.token, 'u1');
    const oldKid = decodeProtectedHeader(before).kid!;

    const { kid: nextKid, signsFrom } = await ctx.container.userTokens.rotate();
    expect(signsFrom.getTime() - ctx.clock.now().getTime()).toBe(PUBLISH_AHEAD_MS);
    const jwks = async (on = ctx) =>
      (
        (await on.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json().keys as {
          kid: string;
        }[]
      ).map((key) => key.kid);
    expect(await jwks()).toEqual(expect.arrayContaining([oldKid, nextKid]));
    expect(await jwks(other)).toEqual(expect.arrayContaining([oldKid, nextKid]));
    // Until its turn, the old key still signs.
    expect(decodeProtectedHeader(await userToken(customer.token, 'u1')).kid).toBe(oldKid);

    const advanced = PUBLISH_AHEAD_MS + 1_000;
    ctx.clock.advance(advanced);
    try {
      const after = await userToken(customer.token, 'u1');
      expect(decodeProtectedHeader(after).kid).toBe(nextKid);
      expect((await asUser(before)).statusCode).toBe(200);
      expect((await asUser(after, 'GET', '/v1/me/search?q=x', other)).statusCode).toBe(200);

      // Once the last token the old key could have signed has expired, it is no longer published
      // (nor deleted here: other test files still sign with it on the real clock).
      ctx.clock.advance(PUBLISHED_AFTER_RETIREMENT_MS);
      try {
        expect(await jwks()).not.toContain(oldKid);
        expect(await jwks()).toContain(nextKid);
      } finally {
        ctx.clock.advance(-PUBLISHED_AFTER_RETIREMENT_MS);
      }
    } finally {
      ctx.clock.advance(-advanced);
    }
  });
});
