import { createHmac } from 'node:crypto';
import type { Redis } from 'ioredis';
import { type Clock, utcDay } from '../../lib/clock.js';
import type { Principal } from '../accounts/schema.js';
import type { RealtimeService } from '../realtime/service.js';
import {
  AUTOMATION_USER_AGENT,
  BLOCK_ABOVE,
  BUSIEST_ADDRESSES,
  SUSPICIOUS_ABOVE,
  TICKET_TTL_SECONDS,
  TICKETS_PER_MINUTE,
  VERDICTS,
  type Verdict,
} from './schema.js';
import { signTicketPayload } from './verify.js';

/** Counters are kept a little longer than the longest report (30 days). */
const KEEP_SECONDS = 32 * 86_400;

export class TooManyTicketsError extends Error {
  override name = 'TooManyTicketsError';
}

export function verdictFor(userAgent: string, viewers: number): { verdict: Verdict; reason: string } {
  if (AUTOMATION_USER_AGENT.test(userAgent)) return { verdict: 'bot', reason: 'automation user agent' };
  if (viewers > BLOCK_ABOVE)
    return { verdict: 'block', reason: `more than ${BLOCK_ABOVE} viewers from one address today` };
  if (viewers > SUSPICIOUS_ABOVE) {
    return { verdict: 'suspicious', reason: `more than ${SUSPICIOUS_ABOVE} viewers from one address today` };
  }
  return { verdict: 'ok', reason: '' };
}

const lastDays = (now: Date, days: number) =>
  Array.from({ length: days }, (_, i) => utcDay(new Date(now.getTime() - i * 86_400_000)));

/**
 * The shield's counters live in Redis, so verdicts hold across replicas. Addresses are kept only as
 * a keyed hash, shortened: enough to tell them apart in a report, useless to recover them.
 */
export function createShieldService(deps: {
  redis: Redis;
  clock: Clock;
  realtime: RealtimeService;
  hashKey: string;
}) {
  const addressHash = (address: string) =>
    createHmac('sha256', deps.hashKey).update(address).digest('hex').slice(0, 12);
  const prefix = (scope: Principal) => `svc:shield:${scope.appId}:${scope.mode}`;

  return {
    issueTicket: async (
      principal: Principal,
      input: { subject: string; scope: string },
      client: { address: string; userAgent: string },
    ) => {
      const now = deps.clock.now();
      const hashed = addressHash(client.address);
      const minuteKey = `svc:shield:rate:${hashed}:${Math.floor(now.getTime() / 60_000)}`;
      const [[, sent]] = (await deps.redis.multi().incr(minuteKey).expire(minuteKey, 120).exec()) as [
        [Error | null, number],
      ];
      if (sent > TICKETS_PER_MINUTE)
        throw new TooManyTicketsError('More than 120 tickets a minute from this address');

      const day = utcDay(now);
      const base = prefix(principal);
      const viewersKey = `${base}:viewers:${day}:${input.scope}:${hashed}`;
      const member = `${input.scope}\t${hashed}`;
      const results = (await deps.redis
        .multi()
        .sadd(viewersKey, input.subject)
        .expire(viewersKey, KEEP_SECONDS)
        .scard(viewersKey)
        .zincrby(`${base}:hits:${day}`, 1, member)
        .expire(`${base}:hits:${day}`, KEEP_SECONDS)
        .exec()) as [Error | null, number][];
      const viewers = Number(results[2]![1]);
      const { verdict, reason } = verdictFor(client.userAgent, viewers);
      await deps.redis
        .multi()
        .hincrby(`${base}:verdicts:${day}`, verdict, 1)
        .expire(`${base}:verdicts:${day}`, KEEP_SECONDS)
        .exec();

      const settings = await deps.realtime.ensure(principal);
      const expiresAt = Math.floor(now.getTime() / 1000) + TICKET_TTL_SECONDS;
      const payload = Buffer.from(
        JSON.stringify({ a: principal.appId, s: input.subject, c: input.scope, v: verdict, e: expiresAt }),
      ).toString('base64url');
      return {
        ticket: `${payload}.${signTicketPayload(settings.shield_secret, payload)}`,
        verdict,
        reason,
        expires_at: expiresAt,
      };
    },

    report: async (principal: Principal, days: number) => {
      const base = prefix(principal);
      const dayList = lastDays(deps.clock.now(), days);
      const verdicts = { ok: 0, suspicious: 0, bot: 0, block: 0 };
      const hits = new Map<string, number>();
      for (const day of dayList) {
        const counts = await deps.redis.hgetall(`${base}:verdicts:${day}`);
        for (const verdict of VERDICTS) verdicts[verdict] += Number(counts[verdict] ?? 0);
        const ranked = await deps.redis.zrange(`${base}:hits:${day}`, '0', '-1', 'WITHSCORES');
        for (let i = 0; i < ranked.length; i += 2)
          hits.set(ranked[i]!, (hits.get(ranked[i]!) ?? 0) + Number(ranked[i + 1]));
      }
      const busiest = [...hits.entries()].sort((a, b) => b[1] - a[1]).slice(0, BUSIEST_ADDRESSES);
      const busiest_addresses = await Promise.all(
        busiest.map(async ([member, count]) => {
          const [scope = '', address = ''] = member.split('\t');
          let viewers = 0;
          for (const day of dayList)
            viewers = Math.max(viewers, await deps.redis.scard(`${base}:viewers:${day}:${scope}:${address}`));
          return { scope, address, viewers, hits: count };
        }),
      );
      return { verdicts, busiest_addresses };
    },
  };
}

export type ShieldService = ReturnType<typeof createShieldService>;
