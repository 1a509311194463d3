import type { FastifyInstance } from 'fastify';
import { digestsEqual, sha256 } from '../lib/secrets.js';
import { ApiError } from './errors.js';

/**
 * The servers' callbacks (ejabberd's auth bridge, MinIO events) carry the shared internal secret as
 * a bearer token. Compared as digests, so the comparison takes the same time whatever was sent.
 */
export function requireInternalSecret(app: FastifyInstance, secret: string): void {
  const expected = sha256(secret);
  app.addHook('onRequest', async (request) => {
    const match = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '');
    if (!match || !digestsEqual(sha256(match[1]!), expected)) {
      request.log.warn('internal callback with a missing or wrong secret');
      throw new ApiError('authentication_error', 'This endpoint is for the bundled servers only');
    }
  });
}
