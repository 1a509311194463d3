/**
 * Verifiers for your server: shield tickets, webhook deliveries and user tokens, each checked offline
 * with Web Crypto (Node 20+, Deno, Bun, browsers, edge runtimes), signatures compared in constant time.
 */

/** A verifier refused what it was given; `reason` says which check failed. */
export class SvcVerificationError extends Error {
  override readonly name = 'SvcVerificationError';
  constructor(readonly reason: string) {
    super(reason);
  }
}

const encoder = new TextEncoder();

function base64ToBytes(base64: string): Uint8Array<ArrayBuffer> {
  const binary = atob(base64);
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

function base64UrlToBytes(base64url: string): Uint8Array<ArrayBuffer> {
  const base64 = base64url.replace(/-/g, '+').replace(/_/g, '/');
  return base64ToBytes(base64.padEnd(base64.length + ((4 - (base64.length % 4)) % 4), '='));
}

function bytesToBase64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

const bytesToBase64Url = (bytes: Uint8Array) =>
  bytesToBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
const bytesToHex = (bytes: Uint8Array) =>
  Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');

/** Equal strings, in time that depends on their length only. */
function constantTimeEqual(a: string, b: string): boolean {
  const [x, y] = [encoder.encode(a), encoder.encode(b)];
  let difference = x.length ^ y.length;
  for (let i = 0; i < x.length; i += 1) difference |= (x[i] ?? 0) ^ (y[i % Math.max(1, y.length)] ?? 0);
  return difference === 0;
}

async function hmacSha256(key: Uint8Array<ArrayBuffer>, data: Uint8Array<ArrayBuffer>): Promise<Uint8Array> {
  const cryptoKey = await crypto.subtle.importKey('raw', key, { name: 'HMAC', hash: 'SHA-256' }, false, [
    'sign',
  ]);
  return new Uint8Array(await crypto.subtle.sign('HMAC', cryptoKey, data));
}

const nowSeconds = () => Date.now() / 1000;

// ----- shield tickets ---------------------------------------------------------------------------

/** A shield ticket's payload: app, subject, scope, verdict, expiry (epoch seconds). */
export interface ShieldTicket {
  a: string;
  s: string;
  c: string;
  v: 'ok' | 'suspicious' | 'block' | 'bot';
  e: number;
}

/**
 * Checks a ticket a client got from `POST /v1/realtime/shield/ticket`, with no call back (the spec's
 * rule): its signature under the app's `shield_secret`, then that it names this subject and scope, is
 * unexpired, and says `ok`. Answers the ticket, or throws SvcVerificationError naming the failed check.
 */
export async function verifyShieldTicket(
  ticket: string,
  expected: { secret: string; subject: string; scope: string; now?: number },
): Promise<ShieldTicket> {
  const [payload = '', signature = '', extra] = ticket.split('.');
  if (extra !== undefined || payload === '') throw new SvcVerificationError('not a shield ticket');
  const mac = await hmacSha256(encoder.encode(expected.secret), encoder.encode(payload));
  if (!constantTimeEqual(bytesToBase64Url(mac), signature)) throw new SvcVerificationError('bad signature');
  const decoded = JSON.parse(new TextDecoder().decode(base64UrlToBytes(payload))) as ShieldTicket;
  if (decoded.s !== expected.subject) throw new SvcVerificationError('another subject');
  if (decoded.c !== expected.scope) throw new SvcVerificationError('another scope');
  if (!(decoded.e > (expected.now ?? nowSeconds()))) throw new SvcVerificationError('expired');
  if (decoded.v !== 'ok') throw new SvcVerificationError(`verdict ${decoded.v}`);
  return decoded;
}

// ----- webhook deliveries -----------------------------------------------------------------------

/** A delivered event: `{id, type, created_at, app_id, mode, data}`. */
export interface WebhookEvent<Data = Record<string, unknown>> {
  id: string;
  type: string;
  created_at: string;
  app_id: string;
  mode: 'live' | 'test';
  data: Data;
}

/** Request headers as `fetch` (a `Headers`) or Node's `http` (a plain object) gives them. */
export type HeaderBag = Headers | Record<string, string | string[] | undefined>;

function header(headers: HeaderBag, name: string): string {
  if (headers instanceof Headers) return headers.get(name) ?? '';
  const value = headers[name] ?? headers[name.toLowerCase()];
  return (Array.isArray(value) ? value[0] : value) ?? '';
}

/** How far a delivery's webhook-timestamp may be from now, seconds (a replay past it is refused). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/**
 * Checks a delivery both ways it is signed, in constant time: `X-Svc-Signature` (HMAC-SHA256 hex of
 * the raw body under the whole `whsec_…` secret) and Standard Webhooks' `webhook-signature` over
 * `id.timestamp.body` (under the secret's base64 part), with the timestamp within the tolerance.
 * Give it the raw body, before any JSON parsing. Answers the event; throws SvcVerificationError.
 * An event may arrive more than once: keep the ids you handled.
 */
export async function verifyWebhook<Data = Record<string, unknown>>(
  body: string | Uint8Array,
  headers: HeaderBag,
  secret: string,
  options: { toleranceSeconds?: number; now?: number } = {},
): Promise<WebhookEvent<Data>> {
  const raw = typeof body === 'string' ? encoder.encode(body) : new Uint8Array(body);
  const spec = `sha256=${bytesToHex(await hmacSha256(encoder.encode(secret), raw))}`;
  if (!constantTimeEqual(spec, header(headers, 'x-svc-signature')))
    throw new SvcVerificationError('bad X-Svc-Signature');
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const tolerance = options.toleranceSeconds ?? WEBHOOK_TOLERANCE_SECONDS;
  if (!/^\d+$/.test(timestamp) || Math.abs((options.now ?? nowSeconds()) - Number(timestamp)) > tolerance)
    throw new SvcVerificationError('webhook-timestamp too old or too new');
  const signed = new Uint8Array([...encoder.encode(`${id}.${timestamp}.`), ...raw]);
  const mac = bytesToBase64(await hmacSha256(base64ToBytes(secret.replace(/^whsec_/, '')), signed));
  const signatures = header(headers, 'webhook-signature').split(' ');
  if (!signatures.some((signature) => constantTimeEqual(signature, `v1,${mac}`)))
    throw new SvcVerificationError('bad webhook-signature');
  return JSON.parse(new TextDecoder().decode(raw)) as WebhookEvent<Data>;
}

// ----- user tokens -------------------------------------------------------------------------------

/** A user token's claims (docs/public-data.md). */
export interface UserTokenClaims {
  iss: string;
  /** The app's id. */
  aud: string;
  /** Your user's id. */
  sub: string;
  mode: 'live' | 'test';
  iat: number;
  exp: number;
  jti: string;
  [claim: string]: unknown;
}

interface Jwk extends JsonWebKey {
  kid?: string;
}

/** How long the signing keys are used before they are fetched again (in the background). */
const JWKS_CACHE_MS = 10 * 60_000;
/**
 * Once keys are cached, they are fetched at most this often, whatever the tokens name: a rotation shows
 * within it (an unknown kid fetches again), while made-up kids, or an API that is down, are not hammered.
 */
const JWKS_REFETCH_MS = 30_000;
/**
 * Keys not fetched again for longer are not used: the API withdraws a replaced key a day and a minute
 * after it stops signing, so older keys may include one it took back (a compromised key, say).
 */
const JWKS_MAX_AGE_MS = 24 * 3_600_000 + 60_000;
/** A fetch of the keys that takes longer fails, so that verifications waiting on it are not held. */
const JWKS_TIMEOUT_MS = 10_000;

/** A token part's bytes, or SvcVerificationError when it is not base64url. */
function tokenPartBytes(part: string, name: string): Uint8Array<ArrayBuffer> {
  try {
    return base64UrlToBytes(part);
  } catch {
    throw new SvcVerificationError(`${name} is not base64url`);
  }
}

/** A token part's JSON object, or SvcVerificationError when it is not one. */
function tokenPartObject(part: string, name: string): Record<string, unknown> {
  const text = new TextDecoder().decode(tokenPartBytes(part, name));
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new SvcVerificationError(`${name} is not JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new SvcVerificationError(`${name} is not a JSON object`);
  return value as Record<string, unknown>;
}

/**
 * Checks user tokens the API minted (ES256), offline against its signing keys from
 * `/.well-known/jwks.json`, fetched once and cached: the signature, the issuer (the API's URL), the
 * audience (your app's id), the mode and the expiry. Every app's tokens are signed with the same
 * keys, so the audience and the mode are what tell yours apart: a token another app minted, or one
 * your test key minted, verifies with the keys alone. A revocation is not visible offline: where it
 * must count, let the API check the token (any /v1/me call).
 *
 * Concurrent verifications share one fetch of the keys. After 10 minutes the cached keys keep
 * answering while they are fetched again, and stay in use if that fails (tried again 30 s later); an
 * unknown kid fetches them again at most every 30 s. Every refusal, junk input and unreachable keys
 * included, is an SvcVerificationError.
 */
export function createUserTokenVerifier(options: {
  baseUrl: string;
  /** Your app's id: tokens of other apps are refused. */
  appId: string;
  /** The mode of the key that minted the tokens you take: `live` (the default) or `test`. */
  mode?: 'live' | 'test';
  /** The issuer the tokens name, when it differs from baseUrl (the API's public URL). */
  issuer?: string;
  fetch?: typeof fetch;
}) {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const issuer = options.issuer ?? baseUrl;
  const doFetch = options.fetch ?? globalThis.fetch;
  let keys: { byKid: Map<string, Jwk>; fetchedAt: number } | undefined;
  /** The fetch under way, which every verification that needs the keys waits on. */
  let fetching: Promise<void> | undefined;
  let lastFetchStartedAt = Number.NEGATIVE_INFINITY;
  /** Why the last fetch failed: the refusal while no keys were ever fetched. */
  let lastFetchFailure = '';

  async function fetchKeys(): Promise<Map<string, Jwk>> {
    const response = await doFetch(`${baseUrl}/.well-known/jwks.json`, {
      signal: AbortSignal.timeout(JWKS_TIMEOUT_MS),
    });
    if (!response.ok) throw new SvcVerificationError(`the signing keys answered ${response.status}`);
    const { keys: list } = (await response.json()) as { keys?: unknown };
    if (!Array.isArray(list)) throw new SvcVerificationError('the signing keys are not a JWKS');
    return new Map(list.map((key: Jwk) => [key.kid ?? '', key]));
  }

  /** Starts a fetch of the keys, or joins the one under way; never rejects (a failure keeps the cache). */
  function refreshKeys(): Promise<void> {
    if (fetching === undefined) {
      lastFetchStartedAt = Date.now();
      fetching = fetchKeys()
        .then(
          (byKid) => {
            keys = { byKid, fetchedAt: Date.now() };
          },
          (error: unknown) => {
            lastFetchFailure =
              error instanceof SvcVerificationError
                ? error.reason
                : `the signing keys could not be fetched: ${error instanceof Error ? error.message : String(error)}`;
          },
        )
        .finally(() => {
          fetching = undefined;
        });
    }
    return fetching;
  }

  async function keyFor(kid: string): Promise<Jwk> {
    const now = Date.now();
    const cooledDown = now - lastFetchStartedAt >= JWKS_REFETCH_MS;
    if (keys !== undefined && now - keys.fetchedAt > JWKS_MAX_AGE_MS) {
      if (fetching !== undefined || cooledDown) await refreshKeys();
      if (Date.now() - keys.fetchedAt > JWKS_MAX_AGE_MS)
        throw new SvcVerificationError(
          `the signing keys are over a day old and could not be fetched again: ${lastFetchFailure}`,
        );
    }
    const cached = keys?.byKid.get(kid);
    if (keys !== undefined && cached !== undefined) {
      // Past their time the keys are fetched again, while the cached ones answer (and after a failure).
      if (now - keys.fetchedAt > JWKS_CACHE_MS && cooledDown) void refreshKeys();
      return cached;
    }
    // An unknown kid may be a new key: fetch, unless a fetch started within the cooldown. Without any
    // keys there is nothing to protect by waiting, so only the sharing of one fetch holds.
    if (fetching !== undefined || keys === undefined || cooledDown) await refreshKeys();
    const fetched = keys?.byKid.get(kid);
    if (fetched === undefined)
      throw new SvcVerificationError(keys === undefined ? lastFetchFailure : 'unknown signing key');
    return fetched;
  }

  return {
    async verify(token: string, now = nowSeconds()): Promise<UserTokenClaims> {
      if (typeof token !== 'string' || !/^[\w-]+\.[\w-]+\.[\w-]+$/.test(token))
        throw new SvcVerificationError('not a JWT');
      const [headerPart, payloadPart, signaturePart] = token.split('.') as [string, string, string];
      const head = tokenPartObject(headerPart, 'header');
      if (head.alg !== 'ES256') throw new SvcVerificationError(`algorithm ${String(head.alg)}`);
      const jwk = await keyFor(typeof head.kid === 'string' ? head.kid : '');
      const key = await crypto.subtle
        .importKey('jwk', jwk, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['verify'])
        .catch(() => {
          throw new SvcVerificationError('the signing key is not a P-256 public key');
        });
      const valid = await crypto.subtle.verify(
        { name: 'ECDSA', hash: 'SHA-256' },
        key,
        tokenPartBytes(signaturePart, 'signature'),
        encoder.encode(`${headerPart}.${payloadPart}`),
      );
      if (!valid) throw new SvcVerificationError('bad signature');
      const claims = tokenPartObject(payloadPart, 'payload') as UserTokenClaims;
      if (claims.iss !== issuer) throw new SvcVerificationError('another issuer');
      if (claims.aud !== options.appId) throw new SvcVerificationError('another app');
      if (claims.mode !== (options.mode ?? 'live')) throw new SvcVerificationError('another mode');
      if (!(claims.exp > now)) throw new SvcVerificationError('expired');
      return claims;
    },
  };
}
