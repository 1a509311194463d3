import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Admission } from '../platform/admission.js';
import { rateLimitHeaders, userLimitAdmission } from '../platform/admission.js';
import type {
  KeyCheck,
  KeyRefusal,
  KeyResolver,
  Principal,
  UserPrincipal,
  UserRefusal,
  UserTokenVerifier,
} from '../platform/caller.js';
import type { Clock } from '../platform/clock.js';
import { errors } from '../platform/errors.js';
import type { AuthKind, InternalCaller, Route } from '../platform/route.js';
import { digestsEqual, sha256 } from '../platform/secrets.js';

const REFUSAL_MESSAGES: Record<KeyRefusal, string> = {
  malformed: 'it is not a secret key (svc_live_… or svc_test_…)',
  publishable: 'publishable keys (pk_…) are accepted only by the shield ticket endpoint',
  unknown: 'no such key',
  revoked: 'the key has been revoked',
  secret: 'a secret key (svc_…) must never be sent from a client: use the app’s publishable key (pk_…)',
};

const USER_REFUSAL_MESSAGES: Record<UserRefusal, string> = {
  malformed: 'send a user token minted by POST /v1/users/{user_id}/tokens',
  invalid: 'the signature or the claims do not verify for this service',
  expired: 'it has expired: ask the app’s server for a new one',
  revoked: 'the user’s tokens have been revoked: ask the app’s server for a new one',
  'key-revoked': 'the API key that minted it has been revoked',
};

/** A JWT's three base64url parts: how a user token sent to a key endpoint is told apart. */
const LOOKS_LIKE_JWT = /^[\w-]+\.[\w-]+\.[\w-]+$/;

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

type Check = { ok: true; principal: Principal } | { ok: false; error: Error; countsTowardLockout: boolean };

const keyCheck = (check: KeyCheck, token: string): Check => {
  if (check.ok) return check;
  const reason =
    check.refusal === 'malformed' && LOOKS_LIKE_JWT.test(token)
      ? 'user tokens are accepted only on /v1/me/…; the app’s server sends its secret key'
      : REFUSAL_MESSAGES[check.refusal];
  return { ok: false, error: errors.invalidKey(reason), countsTowardLockout: true };
};

/** Which credential an auth kind takes, and where the request carries it. */
interface KeyRule {
  read(request: FastifyRequest): string | undefined;
  check(deps: AuthDeps, token: string, address: string): Promise<Check>;
  missing(): Error;
}

/** A locked-out address's keys are not looked up: 429 before PostgreSQL is asked. */
const unlocked = (deps: AuthDeps, address: string) => () => deps.admission.requireUnlocked(address);

const KEY_RULES: Partial<Record<AuthKind, KeyRule>> = {
  'secret-key': {
    read: presentedKey,
    check: async (deps, token, address) =>
      keyCheck(await deps.keys.checkSecretKey(token, unlocked(deps, address)), token),
    missing: errors.missingKey,
  },
  'publishable-key': {
    read: (request) => {
      const header = request.headers['x-publishable-key'];
      return Array.isArray(header) ? header[0] : header;
    },
    check: async (deps, token, address) =>
      keyCheck(await deps.keys.checkPublishableKey(token, unlocked(deps, address)), token),
    missing: () =>
      errors.invalidKey('send the publishable key (pk_live_… or pk_test_…) in X-Publishable-Key'),
  },
  'user-token': {
    read: presentedKey,
    check: async (deps, token) => {
      if (/^(svc|pk)_/.test(token)) {
        return {
          ok: false,
          error: errors.unauthenticated(
            'Invalid user token: API keys are not accepted on /v1/me/…; send the user token the app’s server minted',
          ),
          countsTowardLockout: false,
        };
      }
      const check = await deps.users.checkUserToken(token);
      if (check.ok) return check;
      return {
        ok: false,
        error: errors.unauthenticated(`Invalid user token: ${USER_REFUSAL_MESSAGES[check.refusal]}`),
        // A signature cannot be guessed, so counting refusals protects nothing; it would let one
        // buggy client lock out everyone behind its address, the app's own server included.
        countsTowardLockout: false,
      };
    },
    missing: () => errors.unauthenticated('No user token: send it as "Authorization: Bearer <user token>"'),
  },
};

export interface AuthDeps {
  keys: KeyResolver;
  users: UserTokenVerifier;
  clock: Clock;
  admission: Admission;
  /** Each bundled server's bearer secret for the internal operations it calls. */
  internalSecrets: Readonly<Record<InternalCaller, string>>;
}

/** Whether a live key needs a balance above zero for this operation. */
export const spends = (declared: Route) => declared.price !== undefined || declared.needsBalance === true;

/**
 * The onRequest hook of an auth kind, run before the body is read: a missing, unknown or revoked key
 * is refused unread (keys come from the in-process cache; a refusal counts toward the address's
 * lockout), as is the Free plan on a paid-plan operation.
 */
export function authHook(declared: Route, deps: AuthDeps) {
  const rule = KEY_RULES[declared.auth];
  if (rule) {
    return async (request: FastifyRequest) => {
      const token = rule.read(request);
      if (token === undefined || token === '')
        return deps.admission.refuse(request.ip, rule.missing(), false);
      const check = await rule.check(deps, token, request.ip);
      if (!check.ok) return deps.admission.refuse(request.ip, check.error, check.countsTowardLockout);
      const { principal } = check;
      request.principal = principal;
      if (declared.paidPlan && principal.plan === 'free') {
        throw errors.paymentRequired('This endpoint needs the Pro or Scale plan; the account is on Free');
      }
    };
  }
  if (declared.auth === 'internal') {
    // The bundled server's callback carries its own secret as a bearer token, compared as digests so
    // that the comparison takes the same time whatever was sent.
    if (!declared.internalCaller)
      throw new Error(`${declared.operationId} does not name its internal caller`);
    const expected = sha256(deps.internalSecrets[declared.internalCaller]);
    return async (request: FastifyRequest) => {
      const match = /^Bearer (\S+)$/.exec(request.headers.authorization ?? '');
      if (!match || !digestsEqual(sha256(match[1]!), expected)) {
        request.log.warn({ address: request.ip }, 'internal callback with a missing or wrong secret');
        // Counted like an invalid key: past the limit the address gets 429 for wrong secrets. The
        // right secret always passes, so a flood from a caller's own address cannot lock it out.
        return deps.admission.refuse(
          request.ip,
          errors.unauthenticated('This endpoint is for the bundled servers only'),
          match !== null,
        );
      }
    };
  }
  return undefined;
}

/**
 * Admission (lockout, daily cap, balance) in one Redis round trip, as a preValidation hook: after the
 * body is read and before it is validated, so that invalid requests count toward the daily cap too and
 * nothing of the operation runs for a refused one. Waiting on Redis before the body is read (in
 * onRequest) held every request's body back behind the round trip. Operations that admit in their
 * handler, together with their own writes, skip it.
 */
export function admissionHook(declared: Route, deps: AuthDeps) {
  if (!KEY_RULES[declared.auth] || declared.admission === 'in-handler') return undefined;
  const { perUser } = declared;
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const principal = request.principal!;
    const limit =
      perUser && 'userId' in principal
        ? userLimitAdmission(perUser, principal as UserPrincipal, deps.clock.now())
        : undefined;
    const { quota, result } = await deps.admission.admit<number | null>(
      { address: request.ip, principal, spends: spends(declared) },
      limit?.script,
      limit?.keys,
      limit?.args,
    );
    request.admitted = true;
    reply.headers(rateLimitHeaders(quota));
    if (limit && result) throw limit.refusal(result);
  };
}
