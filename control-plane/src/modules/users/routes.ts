import { route } from '../../platform/route.js';
import {
  JWKS_PATH,
  JwksDocument,
  UserParams,
  UserToken,
  UserTokenRequest,
  UserTokensRevoked,
} from './schema.js';
import type { UserTokens } from './service.js';

/** Verifiers may cache the document this long; a new key is published well before it signs. */
const JWKS_MAX_AGE_SECONDS = 300;

export const userRoutes = (tokens: UserTokens) => [
  route({
    operationId: 'users.tokens.create',
    method: 'POST',
    url: '/v1/users/:user_id/tokens',
    auth: 'secret-key',
    tags: ['users'],
    summary: 'Mint a user token for the app’s user: their client calls /v1/me/… with it (free)',
    params: UserParams,
    body: UserTokenRequest,
    response: UserToken,
    handler: ({ caller, params, body }) => tokens.mint(caller, params.user_id, body.ttl_seconds),
  }),
  route({
    operationId: 'users.tokens.revoke',
    method: 'DELETE',
    url: '/v1/users/:user_id/tokens',
    auth: 'secret-key',
    tags: ['users'],
    summary: 'Revoke every user token of the user: refused on every replica within a second',
    params: UserParams,
    response: UserTokensRevoked,
    handler: ({ caller, params }) => tokens.revokeAll(caller, params.user_id),
  }),
  route({
    operationId: 'users.jwks',
    method: 'GET',
    url: JWKS_PATH,
    auth: 'public',
    tags: ['users'],
    summary: 'The public keys that verify user tokens (JWKS), for an app’s own backend',
    response: JwksDocument,
    handler: async ({ reply }) => {
      reply.header('cache-control', `public, max-age=${JWKS_MAX_AGE_SECONDS}`);
      return tokens.jwks();
    },
  }),
];
