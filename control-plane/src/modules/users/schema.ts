import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import { KEY_MODES } from '../../platform/caller.js';
import { externalId } from '../../platform/identities.js';
import { Deleted } from '../../platform/schemas.js';

export const MIN_USER_TOKEN_TTL = 60;
export const MAX_USER_TOKEN_TTL = 86_400;
export const DEFAULT_USER_TOKEN_TTL = 3_600;

/** The one signing algorithm: ECDSA P-256, which every JOSE library verifies. */
export const USER_TOKEN_ALGORITHM = 'ES256';
/** A new signing key is published this long before it signs, so verifiers' JWKS caches learn it first. */
export const PUBLISH_AHEAD_MS = 10 * 60_000;
/** The service rotates its signing key when the current one has signed this long. */
export const ROTATE_AFTER_MS = 90 * 86_400_000;
/** A retired key stays published until the last token it signed has expired, and a minute more. */
export const PUBLISHED_AFTER_RETIREMENT_MS = MAX_USER_TOKEN_TTL * 1000 + 60_000;
/** Where an app's backend fetches the public keys. */
export const JWKS_PATH = '/.well-known/jwks.json';

export const UserParams = Type.Object(
  { user_id: externalId('Your user id, as the app knows it (the same as chat user_id and live identity)') },
  { additionalProperties: false },
);

export const UserTokenRequest = Type.Object(
  {
    ttl_seconds: Type.Integer({
      minimum: MIN_USER_TOKEN_TTL,
      maximum: MAX_USER_TOKEN_TTL,
      default: DEFAULT_USER_TOKEN_TTL,
      description: 'How long the token is valid',
    }),
  },
  { additionalProperties: false },
);

export const UserToken = Type.Object(
  {
    token: Type.String({
      description:
        'A JWT (ES256) for the user’s client: send it as "Authorization: Bearer <token>" on /v1/me/…',
    }),
    token_type: Type.Literal('Bearer'),
    user_id: Type.String(),
    expires_in: Type.Integer({ description: 'Seconds' }),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const UserTokensRevoked = Deleted(
  {
    revoked_at: Type.String({
      format: 'date-time',
      description: 'Every token of the user minted before now is refused, on every replica within a second',
    }),
  },
  'The delete shape (`id` is the user id)',
);

const Jwk = Type.Object(
  {
    kty: Type.String(),
    crv: Type.String(),
    x: Type.String(),
    y: Type.String(),
    kid: Type.String(),
    alg: Type.String(),
    use: Type.String(),
  },
  { additionalProperties: false },
);

export const JwksDocument = Type.Object(
  { keys: Type.Array(Jwk, { description: 'Every key that signs or signed a token still valid' }) },
  { additionalProperties: false },
);

/** The claims of a user token besides the registered ones (iss, aud = app id, sub = user id, exp, iat, jti). */
export const UserTokenClaims = z.object({
  aud: z.string(),
  sub: z.string(),
  mode: z.enum(KEY_MODES),
  /** The user's token generation when minted: a revocation moves it on. */
  gen: z.number().int().nonnegative(),
  /** The API key that minted it: its app pays and its daily cap counts the user's calls. */
  key_id: z.string(),
});
export type UserTokenClaims = z.infer<typeof UserTokenClaims>;

export const SigningKeyRow = z.object({
  kid: z.string(),
  public_jwk: z.record(z.string(), z.string()),
  private_key_sealed: z.instanceof(Buffer),
  created_at: z.date(),
  signs_from: z.date(),
  retired_at: z.date().nullable(),
  published_until: z.date().nullable(),
});
export type SigningKeyRow = z.infer<typeof SigningKeyRow>;
