import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CompactSign, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createUserTokenVerifier, SvcVerificationError } from '../src/index.js';

// The user-token verifier's own caching of the signing keys and its refusals, without the stack: a
// local server plays the API's public /.well-known/jwks.json, with keys made here, and counts fetches.

const appId = 'app_verifier';
let server: Server;
let baseUrl: string;
/** What the JWKS endpoint does: serve the published keys, answer 503, or drop the connection. */
let endpoint: 'serve' | 'fail' | 'drop';
let published: JWK[];
let fetches: number;

beforeAll(async () => {
  server = createServer((request, response) => {
    fetches += 1;
    if (endpoint === 'drop') return request.socket.destroy();
    if (endpoint === 'fail') return response.writeHead(503).end();
    // A little latency, so that concurrent verifications overlap one fetch.
    setTimeout(() => {
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ keys: published }));
    }, 20);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

beforeEach(() => {
  // Only the clock the cache reads is faked: sockets and the server's timers run on real time.
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(new Date('2030-01-01T00:00:00Z'));
  endpoint = 'serve';
  published = [];
  fetches = 0;
});
afterEach(() => {
  vi.useRealTimers();
});

async function signingKey() {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const kid = randomUUID();
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' } };
}
type SigningKey = Awaited<ReturnType<typeof signingKey>>;

function mint(key: SigningKey, kid = key.kid) {
  return new SignJWT({ mode: 'live', jti: randomUUID() })
    .setProtectedHeader({ alg: 'ES256', kid })
    .setIssuer(baseUrl)
    .setAudience(appId)
    .setSubject('user-1')
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(key.privateKey);
}

const verifier = () => createUserTokenVerifier({ baseUrl, appId });
const later = (ms: number) => vi.setSystemTime(Date.now() + ms);
/** The reason an SvcVerificationError gives, or what else the promise answered. */
const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => 'accepted',
    (error: unknown) =>
      error instanceof SvcVerificationError ? error.reason : `not an SvcVerificationError: ${String(error)}`,
  );

describe('the user-token verifier', () => {
  it('makes one fetch of the keys for 50 concurrent verifications on a cold cache', async () => {
    const key = await signingKey();
    published = [key.jwk];
    const token = await mint(key);
    const tokens = verifier();
    const claims = await Promise.all(Array.from({ length: 50 }, () => tokens.verify(token)));
    expect(claims.map((claim) => claim.sub)).toEqual(Array(50).fill('user-1'));
    expect(fetches).toBe(1);
  });

  it('fetches the keys once for a burst of unknown key ids, and then not again before the cooldown', async () => {
    const key = await signingKey();
    published = [key.jwk];
    const tokens = verifier();
    await tokens.verify(await mint(key));
    expect(fetches).toBe(1);

    // Past the cooldown, made-up key ids share one fetch with a token of a newly published key.
    const rotated = await signingKey();
    published = [key.jwk, rotated.jwk];
    later(31_000);
    const forged = await Promise.all(Array.from({ length: 49 }, () => mint(key, randomUUID())));
    const outcomes = await Promise.allSettled([...forged, await mint(rotated)].map((t) => tokens.verify(t)));
    expect(outcomes.filter((outcome) => outcome.status === 'rejected')).toHaveLength(49);
    expect(outcomes.at(-1)).toMatchObject({ status: 'fulfilled', value: { sub: 'user-1' } });
    expect(fetches).toBe(2);

    later(10_000);
    const refusals = await Promise.allSettled(forged.map((t) => tokens.verify(t)));
    expect(refusals.every((refusal) => refusal.status === 'rejected')).toBe(true);
    expect(fetches).toBe(2);
  });

  it('keeps verifying with the cached keys when fetching them again fails, and retries later', async () => {
    const key = await signingKey();
    published = [key.jwk];
    const token = await mint(key);
    const tokens = verifier();
    await tokens.verify(token);

    // Past the refresh time: neither a 503 nor a dropped connection refuses a cached key's token.
    later(11 * 60_000);
    endpoint = 'fail';
    expect(await tokens.verify(token)).toMatchObject({ sub: 'user-1' });
    await vi.waitFor(() => expect(fetches).toBe(2));
    later(31_000);
    endpoint = 'drop';
    // Verifying again until the verifier has taken the 503 in and, past the cooldown, fetches again.
    await vi.waitFor(async () => {
      expect(await tokens.verify(token)).toMatchObject({ sub: 'user-1' });
      expect(fetches).toBe(3);
    });
    // Within the cooldown a failed fetch is not retried.
    expect(await tokens.verify(token)).toMatchObject({ sub: 'user-1' });
    expect(fetches).toBe(3);

    // Once the endpoint is back, the next fetch brings its keys.
    later(31_000);
    endpoint = 'serve';
    const rotated = await signingKey();
    published = [key.jwk, rotated.jwk];
    await vi.waitFor(async () => {
      expect(await tokens.verify(token)).toMatchObject({ sub: 'user-1' });
      expect(fetches).toBe(4);
    });
    expect(await tokens.verify(await mint(rotated))).toMatchObject({ sub: 'user-1' });
    expect(fetches).toBe(4);
  });

  it('stops using keys it could not fetch again for over a day, until it can', async () => {
    const key = await signingKey();
    published = [key.jwk];
    const tokens = verifier();
    await tokens.verify(await mint(key));
    endpoint = 'fail';
    later(23 * 3_600_000);
    expect(await tokens.verify(await mint(key))).toMatchObject({ sub: 'user-1' });
    // A day and a minute: the API may have withdrawn a key since, so none is trusted unchecked.
    later(3_600_000 + 60_001);
    expect(await refusal(tokens.verify(await mint(key)))).toBe(
      'the signing keys are over a day old and could not be fetched again: the signing keys answered 503',
    );
    later(31_000);
    endpoint = 'serve';
    expect(await tokens.verify(await mint(key))).toMatchObject({ sub: 'user-1' });
  });

  it('refuses with SvcVerificationError, not a crash, while no keys could ever be fetched', async () => {
    const token = await mint(await signingKey());
    const tokens = verifier();
    endpoint = 'drop';
    expect(await refusal(tokens.verify(token))).toMatch(/^the signing keys could not be fetched: /);
    endpoint = 'fail';
    expect(await refusal(tokens.verify(token))).toBe('the signing keys answered 503');
    expect(fetches).toBe(2);
  });

  it('refuses junk tokens with SvcVerificationError naming what is wrong', async () => {
    const key = await signingKey();
    published = [key.jwk];
    const tokens = verifier();
    const token = await mint(key);
    const [header = '', payload = ''] = token.split('.');
    const encoded = (text: string) => Buffer.from(text).toString('base64url');
    const notJson = await new CompactSign(new TextEncoder().encode('not json'))
      .setProtectedHeader({ alg: 'ES256', kid: key.kid })
      .sign(key.privateKey);
    const junk: Record<string, unknown> = {
      empty: '',
      'no dots': 'abc',
      'two parts': 'a.b',
      'not base64url': `${header}.${payload}.not*base64`,
      'standard base64': `${header}.${payload}.ab+/`,
      'a header of 5 characters': `AAAAA.${payload}.AAAA`,
      'a header that is not JSON': `${encoded('{alg')}.${payload}.AAAA`,
      'a header that is null': `${encoded('null')}.${payload}.AAAA`,
      'a header that is an array': `${encoded('["ES256"]')}.${payload}.AAAA`,
      'a signature of 5 characters': `${header}.${payload}.AAAAA`,
      'a payload that is not JSON': notJson,
      'not a string': undefined,
    };
    const reasons: Record<string, string> = {};
    for (const [name, value] of Object.entries(junk))
      reasons[name] = await refusal(tokens.verify(value as string));
    expect(reasons).toEqual({
      empty: 'not a JWT',
      'no dots': 'not a JWT',
      'two parts': 'not a JWT',
      'not base64url': 'not a JWT',
      'standard base64': 'not a JWT',
      'a header of 5 characters': 'header is not base64url',
      'a header that is not JSON': 'header is not JSON',
      'a header that is null': 'header is not a JSON object',
      'a header that is an array': 'header is not a JSON object',
      'a signature of 5 characters': 'signature is not base64url',
      'a payload that is not JSON': 'payload is not JSON',
      'not a string': 'not a JWT',
    });
  });
});
