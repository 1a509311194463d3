import { randomUUID } from 'node:crypto';
import {
  decodeProtectedHeader,
  exportJWK,
  exportPKCS8,
  generateKeyPair,
  importJWK,
  importPKCS8,
  type JWTPayload,
  errors as joseErrors,
  jwtVerify,
  SignJWT,
} from 'jose';
import type { DatabasePool } from 'slonik';
import { createSharedCache, type InvalidationBus } from '../../platform/cache.js';
import type {
  KeyMode,
  Principal,
  UserCheck,
  UserPrincipal,
  UserTokenVerifier,
} from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import { randomBase62 } from '../../platform/ids.js';
import type { Sealer } from '../../platform/sealing.js';
import { inTransaction } from '../../platform/transaction.js';
import {
  PUBLISH_AHEAD_MS,
  PUBLISHED_AFTER_RETIREMENT_MS,
  ROTATE_AFTER_MS,
  type SigningKeyRow,
  USER_TOKEN_ALGORITHM,
  UserTokenClaims,
} from './schema.js';
import { usersStore } from './store.js';

type CryptoKeyLike = Awaited<ReturnType<typeof importPKCS8>>;

interface PublishedKey {
  row: SigningKeyRow;
  publicKey: CryptoKeyLike;
  /** Opened on first use: most replicas verify far more than they sign. */
  privateKey?: Promise<CryptoKeyLike>;
}

/** Published keys change on rotation only, which tells every replica through the bus. */
const KEYS_CACHE_TTL_MS = 60_000;
/** A revocation reaches every replica through the bus; the TTL is the safety net. */
const GENERATION_CACHE_TTL_MS = 60_000;
const GENERATION_CACHE_ENTRIES = 200_000;
/** Keys no longer published are deleted this long after. */
const DELETE_AFTER_UNPUBLISHED_MS = 7 * 86_400_000;
/** Tokens naming an unknown key read the keys again at most this often. */
const RELOAD_FOR_UNKNOWN_KID_MS = 5_000;
/** Verified tokens kept in process (about 1 KiB each). */
const VERIFIED_TOKENS = 50_000;
/** What a sealed private key is bound to, so it opens only as what it was sealed for. */
const sealOwner = (kid: string) => `user-token-key:${kid}`;

/**
 * User tokens: JWTs (ES256) the service signs for an app's user, which the user's client sends on
 * /v1/me/…. Verification needs no database read on the hot path: the published keys, the minting
 * key's principal and the user's token generation come from caches every replica invalidates.
 */
export function createUserTokens(deps: {
  pool: DatabasePool;
  clock: Clock;
  sealer: Sealer;
  bus: InvalidationBus;
  /** The `iss` of every token: the service's public URL. */
  issuer: string;
  /** The principal of an API key by its id (cached by the accounts module), null when unknown. */
  principalOfKey(keyId: string): Promise<(Principal & { revoked: boolean }) | null>;
}) {
  const store = usersStore(deps.pool);
  const keysCache = createSharedCache<PublishedKey[]>({
    name: 'user-token-keys',
    ttlMs: KEYS_CACHE_TTL_MS,
    maxEntries: 1,
    bus: deps.bus,
  });
  const generations = createSharedCache<number>({
    name: 'user-token-generations',
    ttlMs: GENERATION_CACHE_TTL_MS,
    maxEntries: GENERATION_CACHE_ENTRIES,
    bus: deps.bus,
  });
  const generationKey = (appId: string, mode: KeyMode, userId: string) => `${appId}:${mode}:${userId}`;
  const generationOf = (appId: string, mode: KeyMode, userId: string) =>
    generations.get(generationKey(appId, mode, userId), () => store.generation(appId, mode, userId));

  const isPublished = (row: SigningKeyRow, now: number) =>
    row.published_until === null || row.published_until.getTime() > now;

  /** The keys published now: the cache holds them all, and time decides which still count. */
  const publishedKeys = async () => {
    const keys = await keysCache.get('all', async () =>
      Promise.all(
        (await store.keys()).map(async (row) => ({
          row,
          publicKey: (await importJWK(row.public_jwk, USER_TOKEN_ALGORITHM)) as CryptoKeyLike,
        })),
      ),
    );
    const now = deps.clock.now().getTime();
    return keys.filter((key) => isPublished(key.row, now));
  };

  const signsNow = (row: SigningKeyRow, now: number) =>
    row.signs_from.getTime() <= now && (row.retired_at === null || row.retired_at.getTime() > now);

  /**
   * Adds a signing key, under a lock every replica takes. `rotate`: the new key is published
   * `PUBLISH_AHEAD_MS` before it takes over (at once when none signs), and the keys it replaces stay
   * published until their last token has expired. `ensure`: only when no key signs now (a fresh
   * install), so that replicas starting together make one key. Answers the key that signs then.
   */
  async function addKey(
    reason: 'rotate' | 'ensure',
    now = deps.clock.now(),
  ): Promise<{ kid: string; signsFrom: Date }> {
    const { publicKey, privateKey } = await generateKeyPair(USER_TOKEN_ALGORITHM, { extractable: true });
    const kid = randomBase62(16);
    const { kty, crv, x, y } = await exportJWK(publicKey);
    const jwk = { kty: kty!, crv: crv!, x: x!, y: y!, kid, alg: USER_TOKEN_ALGORITHM, use: 'sig' };
    const sealed = deps.sealer.seal(await exportPKCS8(privateKey), sealOwner(kid));
    const added = await inTransaction(deps.pool, async (tx) => {
      const keys = usersStore(tx);
      await keys.lockRotation();
      const current = (await keys.keys()).find((row) => signsNow(row, now.getTime()));
      if (current && reason === 'ensure') return { kid: current.kid, signsFrom: current.signs_from };
      const signing = current !== undefined;
      const signsFrom = signing ? new Date(now.getTime() + PUBLISH_AHEAD_MS) : now;
      await keys.insertKey({ kid, publicJwk: jwk, sealed, at: now, signsFrom });
      await keys.retireAllBut(kid, signsFrom, new Date(signsFrom.getTime() + PUBLISHED_AFTER_RETIREMENT_MS));
      // Long unpublished only: a replica whose clock runs ahead must not take keys from the others.
      await keys.deleteUnpublished(new Date(now.getTime() - DELETE_AFTER_UNPUBLISHED_MS));
      return { kid, signsFrom };
    });
    await keysCache.clear();
    return added;
  }

  /** The key that signs now: the newest whose turn has come. */
  async function signingKey(): Promise<PublishedKey> {
    const at = deps.clock.now();
    const now = at.getTime();
    const pick = (keys: PublishedKey[]) => keys.find((key) => signsNow(key.row, now));
    let key = pick(await publishedKeys());
    if (!key) {
      // The key that signs now by the table, under the lock, found by its id: a replica's cache or
      // a clock a moment off must not make it look for another.
      const { kid } = await addKey('ensure', at);
      key = (await publishedKeys()).find((candidate) => candidate.row.kid === kid);
      if (!key) throw new Error(`user token signing key ${kid} is not published`);
    }
    key.privateKey ??= importPKCS8(
      deps.sealer.open(key.row.private_key_sealed, sealOwner(key.row.kid)),
      USER_TOKEN_ALGORITHM,
    ) as Promise<CryptoKeyLike>;
    return key;
  }

  /**
   * Tokens whose signature verified, with their claims: a client sends one token for many calls,
   * and an ES256 check costs more CPU than the rest of a read. Keyed by the whole token, so only the
   * very token that verified hits; expiry, the minting key and revocation are checked every call.
   */
  const verified = new Map<string, UserTokenClaims & { exp: number }>();
  /** When the keys were last read again for a token naming an unknown key (process time). */
  let lastReload = Number.NEGATIVE_INFINITY;

  /** The token's claims once its signature and claims verify. */
  async function verifiedClaims(token: string): Promise<UserCheck | (UserTokenClaims & { exp: number })> {
    const known = verified.get(token);
    if (known) {
      if (known.exp * 1000 > deps.clock.now().getTime()) return known;
      verified.delete(token);
      return { ok: false, refusal: 'expired' };
    }
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(token).kid;
    } catch {
      return { ok: false, refusal: 'malformed' };
    }
    let key = (await publishedKeys()).find((candidate) => candidate.row.kid === kid);
    if (!key && performance.now() - lastReload > RELOAD_FOR_UNKNOWN_KID_MS) {
      // A key another replica just made, whose notice this one missed: look once more, at most
      // once per interval, so that tokens naming made-up keys never reach PostgreSQL in bulk.
      lastReload = performance.now();
      keysCache.drop('all');
      key = (await publishedKeys()).find((candidate) => candidate.row.kid === kid);
    }
    if (!key) return { ok: false, refusal: 'invalid' };
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, key.publicKey, {
        issuer: deps.issuer,
        algorithms: [USER_TOKEN_ALGORITHM],
        currentDate: deps.clock.now(),
        requiredClaims: ['exp', 'iat', 'sub', 'aud'],
      }));
    } catch (error) {
      return { ok: false, refusal: error instanceof joseErrors.JWTExpired ? 'expired' : 'invalid' };
    }
    const claims = UserTokenClaims.safeParse(payload);
    if (!claims.success) return { ok: false, refusal: 'invalid' };
    const entry = { ...claims.data, exp: payload.exp! };
    // Maps keep insertion order: the first entry is the oldest.
    if (verified.size >= VERIFIED_TOKENS) verified.delete(verified.keys().next().value as string);
    verified.set(token, entry);
    return entry;
  }

  /** Refusals of a token's signature or claims; `expired` is kept apart (it is no attack). */
  async function verify(token: string): Promise<UserCheck> {
    const claims = await verifiedClaims(token);
    if ('ok' in claims) return claims;
    const { aud, sub, mode, gen, key_id } = claims;
    const principal = await deps.principalOfKey(key_id);
    if (!principal || principal.appId !== aud || principal.mode !== mode)
      return { ok: false, refusal: 'invalid' };
    if (principal.revoked) return { ok: false, refusal: 'key-revoked' };
    if ((await generationOf(aud, mode, sub)) !== gen) return { ok: false, refusal: 'revoked' };
    const { revoked: _, ...caller } = principal;
    return { ok: true, principal: { ...caller, userId: sub } satisfies UserPrincipal };
  }

  const verifier: UserTokenVerifier = { checkUserToken: verify };

  return {
    verifier,

    /** A token for the app's user, signed now, valid `ttlSeconds`. Free. */
    mint: async (principal: Principal, userId: string, ttlSeconds: number) => {
      // From PostgreSQL, not the cache: right after a revocation on another replica, a token minted
      // with the old generation would be refused once the news arrives.
      const [key, gen] = await Promise.all([
        signingKey(),
        store.generation(principal.appId, principal.mode, userId),
      ]);
      const issuedAt = Math.floor(deps.clock.now().getTime() / 1000);
      const token = await new SignJWT({ mode: principal.mode, gen, key_id: principal.keyId })
        .setProtectedHeader({ alg: USER_TOKEN_ALGORITHM, kid: key.row.kid, typ: 'JWT' })
        .setIssuer(deps.issuer)
        .setAudience(principal.appId)
        .setSubject(userId)
        .setIssuedAt(issuedAt)
        .setExpirationTime(issuedAt + ttlSeconds)
        .setJti(randomUUID())
        .sign(await key.privateKey!);
      return {
        token,
        token_type: 'Bearer' as const,
        user_id: userId,
        expires_in: ttlSeconds,
        expires_at: new Date((issuedAt + ttlSeconds) * 1000).toISOString(),
      };
    },

    /** Refuses every token of the user minted so far, on every replica from the next request on. */
    revokeAll: async (principal: Principal, userId: string) => {
      const at = deps.clock.now();
      await store.bumpGeneration(principal.appId, principal.mode, userId, at);
      // Forgotten rather than kept as bumped: a concurrent revocation's higher generation, heard
      // before this line, would otherwise be overwritten with this lower one until the entry expires.
      await generations.invalidate(generationKey(principal.appId, principal.mode, userId));
      return { ok: true as const, id: userId, revoked_at: at.toISOString() };
    },

    /** The JWKS document: every key that signs or signed a token that may still be valid. */
    jwks: async () => {
      await signingKey();
      return {
        keys: (await publishedKeys()).map(({ row }) => ({
          kty: row.public_jwk.kty!,
          crv: row.public_jwk.crv!,
          x: row.public_jwk.x!,
          y: row.public_jwk.y!,
          kid: row.kid,
          alg: USER_TOKEN_ALGORITHM,
          use: 'sig',
        })),
      };
    },

    rotate: () => addKey('rotate'),

    /** Rotates once the signing key has signed `ROTATE_AFTER_MS`, unless its successor waits already. */
    rotateIfDue: async () => {
      const now = deps.clock.now().getTime();
      const keys = await publishedKeys();
      const current = keys.find((key) => signsNow(key.row, now));
      const successor = keys.some((key) => key.row.signs_from.getTime() > now);
      if (current && !successor && now - current.row.signs_from.getTime() >= ROTATE_AFTER_MS) {
        return addKey('rotate');
      }
      return null;
    },
  };
}

export type UserTokens = ReturnType<typeof createUserTokens>;
