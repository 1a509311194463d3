import type { Redis } from 'ioredis';
import { redisScript } from '../adapters/redis.js';
import { clientNetwork } from './addresses.js';
import type { Principal, UserPrincipal } from './caller.js';
import { type Clock, fixedWindow, secondsUntilUtcMidnight, utcDay } from './clock.js';
import { errors } from './errors.js';
import { type Standing, standingKey } from './standing.js';

/** Spec: twenty invalid keys from one address within ten minutes lock the address out. */
export const INVALID_KEY_LIMIT = 20;
export const INVALID_KEY_WINDOW_SECONDS = 600;
const QUOTA_TTL_SECONDS = 2 * 86_400;

/**
 * Admission of a keyed request, in one Redis round trip: the address's invalid-key lockout, the
 * key's daily cap and, when the call spends, whether the live account can pay. An operation may add
 * a script body of its own (a mint's credential, a shield ticket's counters) that runs in the same
 * round trip, only once the request is admitted.
 *
 * KEYS[1] lockout counter, KEYS[2] daily quota counter, KEYS[3] account standing;
 * ARGV[1] lockout limit, ARGV[2] daily cap, ARGV[3] quota TTL, ARGV[4] '1' when a funded balance is
 * needed. The body sees its own keys and arguments as K and A (KEYS and ARGV after those).
 */
const PRELUDE = `
local failures = tonumber(redis.call('GET', KEYS[1]) or '0')
if failures >= tonumber(ARGV[1]) then return {'locked', redis.call('TTL', KEYS[1])} end
local standing = false
if ARGV[4] == '1' then
  standing = redis.call('GET', KEYS[3])
  if not standing then return {'standing-unknown', 0} end
end
local used = redis.call('INCR', KEYS[2])
if used == 1 then redis.call('EXPIRE', KEYS[2], ARGV[3]) end
if used > tonumber(ARGV[2]) then return {'quota', used} end
if standing and string.sub(standing, 1, 1) ~= '1' then return {'unfunded', used} end
local K = {unpack(KEYS, 4)}
local A = {unpack(ARGV, 5)}
`;

/** A script body an operation runs on admission; it returns the operation's result (or nothing). */
export interface AdmissionScript {
  name: string;
  body: string;
}

const NO_BODY: AdmissionScript = { name: 'admit', body: 'return nil' };

/** Counts an invalid key unless the address is locked out; answers the failures so far or -TTL. */
const INVALID_KEY = `
local failures = tonumber(redis.call('GET', KEYS[1]) or '0')
if failures >= tonumber(ARGV[1]) then return -math.max(redis.call('TTL', KEYS[1]), 1) end
if ARGV[3] == '1' then
  failures = redis.call('INCR', KEYS[1])
  if failures == 1 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
end
return failures`;

export interface QuotaState {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

/** IETF draft "RateLimit header fields", per key and UTC day. */
export function rateLimitHeaders(quota: QuotaState): Record<string, string> {
  return {
    'ratelimit-limit': String(quota.limit),
    'ratelimit-remaining': String(quota.remaining),
    'ratelimit-reset': String(quota.resetSeconds),
  };
}

export interface Admitted<T> {
  quota: QuotaState;
  result: T;
}

type Reply = [status: string, used: number, result?: unknown];

type ScriptCommand = (numberOfKeys: number, ...keysAndArgs: (string | number)[]) => Promise<Reply>;

/** The Redis keys of the invalid-key lockout's counters, one per client network. */
export const LOCKOUT_KEY_PREFIX = 'svc:authfail:';

export function createAdmission(deps: { redis: Redis; clock: Clock; standing: Standing }) {
  // Per network: an IPv6 client could otherwise take a fresh address of its /64 for every key it tries.
  const lockoutKey = (address: string) => `${LOCKOUT_KEY_PREFIX}${clientNetwork(address)}`;
  const commands = new Map<string, ScriptCommand>();
  const invalidKey = redisScript<number>(deps.redis, INVALID_KEY);

  function command(script: AdmissionScript): ScriptCommand {
    let defined = commands.get(script.name);
    if (!defined) {
      defined = redisScript<Reply>(
        deps.redis,
        `${PRELUDE}local function operation()\n${script.body}\nend\nreturn {'ok', used, operation()}`,
      );
      commands.set(script.name, defined);
    }
    return defined;
  }

  return {
    /**
     * Admits a request of a valid key (429 locked out or over the daily cap, 402 when it spends and
     * the live balance is empty) and runs the operation's script when given. Returns the quota for
     * the RateLimit headers and what the script returned.
     */
    admit: async <T = unknown>(
      request: {
        address: string;
        principal: Principal;
        /** The call spends: a live key needs a balance above zero. */
        spends: boolean;
      },
      script: AdmissionScript = NO_BODY,
      keys: string[] = [],
      args: (string | number)[] = [],
    ): Promise<Admitted<T>> => {
      const { principal } = request;
      const now = deps.clock.now();
      const run = command(script);
      const spends = request.spends && principal.mode === 'live';
      const call = () =>
        run(
          3 + keys.length,
          lockoutKey(request.address),
          `svc:quota:${principal.keyId}:${utcDay(now)}`,
          standingKey(principal.accountId),
          ...keys,
          INVALID_KEY_LIMIT,
          principal.dailyRequestCap,
          QUOTA_TTL_SECONDS,
          spends ? '1' : '0',
          ...args,
        );
      let [status, used, result] = await call();
      if (status === 'standing-unknown') {
        // Nothing was counted or written: learn the balance from PostgreSQL and go again.
        await deps.standing.load(principal.accountId);
        [status, used, result] = await call();
      }
      const resetSeconds = secondsUntilUtcMidnight(now);
      const quota = {
        limit: principal.dailyRequestCap,
        remaining: Math.max(0, principal.dailyRequestCap - used),
        resetSeconds,
      };
      if (status === 'ok') return { quota, result: result as T };
      if (status === 'locked') throw errors.lockedOut(Math.max(1, used));
      const refusal =
        status === 'quota'
          ? errors.dailyCapReached(quota.limit, resetSeconds)
          : errors.paymentRequired(
              'The prepaid balance of this account is empty: top up to continue with a live key',
            );
      Object.assign(refusal.headers, rateLimitHeaders(quota));
      throw refusal;
    },

    /**
     * A missing or invalid key: 429 while the address is locked out, else the given 401 (an invalid
     * key, unlike a missing one, also counts toward the lockout).
     */
    /**
     * 429 while the address is locked out, counting nothing: checked before a key missing from the
     * cache is looked up, so that an address locked out for made-up keys costs PostgreSQL nothing.
     */
    requireUnlocked: async (address: string): Promise<void> => {
      const failures = (await invalidKey(
        1,
        lockoutKey(address),
        INVALID_KEY_LIMIT,
        INVALID_KEY_WINDOW_SECONDS,
        '0',
      )) as number;
      if (failures < 0) throw errors.lockedOut(-failures);
    },

    refuse: async (address: string, refusal: Error, counts: boolean): Promise<never> => {
      const failures = (await invalidKey(
        1,
        lockoutKey(address),
        INVALID_KEY_LIMIT,
        INVALID_KEY_WINDOW_SECONDS,
        counts ? '1' : '0',
      )) as number;
      if (failures < 0) throw errors.lockedOut(-failures);
      throw refusal;
    },
  };
}

export type Admission = ReturnType<typeof createAdmission>;

/** A per-user cap of a user-token operation: at most `limit` calls in each `windowSeconds` window. */
export interface UserLimit {
  /** Names the counter; operations with the same name share it. */
  name: string;
  limit: number;
  windowSeconds: number;
}

/** Counts a call in the user's fixed window; answers the seconds until the window ends once past the cap. */
const USER_LIMIT: AdmissionScript = {
  name: 'user-limit',
  body: `
local calls = redis.call('INCR', K[1])
if calls == 1 then redis.call('EXPIRE', K[1], A[2]) end
if calls > tonumber(A[1]) then return math.max(redis.call('TTL', K[1]), 1) end
return nil`,
};

/** The admission script, keys and arguments of a user's limit, and the refusal once it is passed. */
export function userLimitAdmission(limit: UserLimit, principal: UserPrincipal, now: Date) {
  // The counter lives until its window ends, which is what Retry-After answers past the cap.
  const window = fixedWindow(now, limit.windowSeconds);
  return {
    script: USER_LIMIT,
    keys: [
      `svc:userlimit:${limit.name}:${principal.appId}:${principal.mode}:${window.index}:${principal.userId}`,
    ],
    args: [limit.limit, window.secondsLeft],
    refusal: (retryAfterSeconds: number) =>
      errors.rateLimited(
        `This user may make ${limit.limit} such calls per ${limit.windowSeconds >= 3600 ? `${limit.windowSeconds / 3600} h` : `${limit.windowSeconds} s`}; try again later`,
        retryAfterSeconds,
      ),
  };
}
