import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AccountsService, KeyCheck, KeyRefusal } from '../modules/accounts/service.js';
import { errors } from './errors.js';
import type { RequestLimits } from './limits.js';

const REFUSAL_MESSAGES: Record<KeyRefusal, string> = {
  malformed: 'it is not a secret key (svc_live_… or svc_test_…)',
  publishable: 'publishable keys (pk_…) are accepted only by the shield ticket endpoint',
  unknown: 'no such key',
  revoked: 'the key has been revoked',
  secret: 'a secret key (svc_…) must never be sent from a client: use the app’s publishable key (pk_…)',
};

/** The secret key of a request: `Authorization: Bearer <key>` first, else `X-API-Key`. */
export function presentedKey(request: FastifyRequest): string | undefined {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match ? match[1] : authorization;
  }
  const apiKey = request.headers['x-api-key'];
  return Array.isArray(apiKey) ? apiKey[0] : apiKey;
}

/** Which key an endpoint takes, and where the request carries it. */
interface KeyRule {
  read(request: FastifyRequest): string | undefined;
  check(accounts: AccountsService, token: string): Promise<KeyCheck>;
  missing(): Error;
}

const SECRET_KEY: KeyRule = {
  read: presentedKey,
  check: (accounts, token) => accounts.checkSecretKey(token),
  missing: errors.missingKey,
};

const PUBLISHABLE_KEY: KeyRule = {
  read: (request) => {
    const header = request.headers['x-publishable-key'];
    return Array.isArray(header) ? header[0] : header;
  },
  check: (accounts, token) => accounts.checkPublishableKey(token),
  missing: () => errors.invalidKey('send the publishable key (pk_live_… or pk_test_…) in X-Publishable-Key'),
};

/**
 * The pipeline every keyed endpoint shares: address lockout, key check, daily cap. Registered as an
 * onRequest hook of the keyed scope, so it runs before body parsing and validation: a refused
 * request does no work at all.
 */
function requireKey(
  app: FastifyInstance,
  rule: KeyRule,
  deps: { accounts: AccountsService; limits: RequestLimits },
) {
  app.addHook('onRequest', async (request, reply) => {
    if (request.method === 'OPTIONS') return;
    const lockedFor = await deps.limits.lockoutSecondsLeft(request.ip);
    if (lockedFor > 0) throw errors.lockedOut(lockedFor);

    const token = rule.read(request);
    if (token === undefined || token === '') throw rule.missing();
    const check = await rule.check(deps.accounts, token);
    if (!check.ok) {
      await deps.limits.recordInvalidKey(request.ip);
      throw errors.invalidKey(REFUSAL_MESSAGES[check.refusal]);
    }

    const quota = await deps.limits.consumeDailyQuota(check.principal.keyId, check.principal.dailyRequestCap);
    // IETF draft "RateLimit header fields" (RateLimit-Limit / -Remaining / -Reset), per key and UTC day.
    reply.header('ratelimit-limit', quota.limit);
    reply.header('ratelimit-remaining', quota.remaining);
    reply.header('ratelimit-reset', quota.resetSeconds);
    if (quota.exceeded) throw errors.dailyCapReached(quota.limit, quota.resetSeconds);
    if (request.routeOptions.config.requiresPaidPlan && check.principal.plan === 'free') {
      throw errors.paymentRequired('This endpoint needs the Pro or Scale plan; the account is on Free');
    }
    request.principal = check.principal;
  });
}

export const requireSecretKey = (
  app: FastifyInstance,
  deps: { accounts: AccountsService; limits: RequestLimits },
) => requireKey(app, SECRET_KEY, deps);

export const requirePublishableKey = (
  app: FastifyInstance,
  deps: { accounts: AccountsService; limits: RequestLimits },
) => requireKey(app, PUBLISHABLE_KEY, deps);
