import { createHmac } from 'node:crypto';
import type { Redis } from 'ioredis';
import { pipelined } from '../../adapters/redis.js';
import { clientNetwork } from '../../platform/addresses.js';
import type { AdmissionScript } from '../../platform/admission.js';
import type { AppScope, Principal } from '../../platform/caller.js';
import { type Clock, utcDay } from '../../platform/clock.js';
import { errors } from '../../platform/errors.js';
import type { RealtimeService } from '../realtime/service.js';
import { type Contender, contenders, dayHits, rankBusiest } from './busiest.js';
import {
  AUTOMATION_USER_AGENT,
  BLOCK_ABOVE,
  BUSIEST_ADDRESSES,
  BUSIEST_COMPLETED,
  BUSIEST_READ_PER_DAY,
  SUSPICIOUS_ABOVE,
  TICKET_TTL_SECONDS,
  TICKETS_PER_MINUTE,
  VERDICTS,
  type Verdict,
} from './schema.js';
import { signTicketPayload } from './verify.js';

/** Counters are kept a little longer than the longest report (30 days). */
const KEEP_SECONDS = 32 * 86_400;

/**
 * A ticket's counters, in the request's admission round trip (K: the address's tickets this minute,
 * the viewers of (scope, address) today, today's hits, today's verdicts; A: tickets per minute, subject,
 * hits member, keep seconds, bot '1'/'0', suspicious above, block above). Past the per-minute rate the
 * ticket is refused before anything is counted. Returns the verdict and the viewers.
 *
 * A day's counters expire `keep seconds` after the day's first ticket (EXPIRE … NX): at most a day
 * before they would if every ticket set the expiry again, which cost three more writes to Redis's
 * append-only file a ticket. Reports read 30 days; counters are kept 32.
 */
const TICKET: AdmissionScript = {
  name: 'shield-ticket',
  body: `
local sent = redis.call('INCR', K[1])
if sent == 1 then redis.call('EXPIRE', K[1], 120) end
if sent > tonumber(A[1]) then return {'rate', 0} end
redis.call('SADD', K[2], A[2])
redis.call('EXPIRE', K[2], A[4], 'NX')
local viewers = redis.call('SCARD', K[2])
redis.call('ZINCRBY', K[3], 1, A[3])
redis.call('EXPIRE', K[3], A[4], 'NX')
local verdict = 'ok'
if A[5] == '1' then verdict = 'bot'
elseif viewers > tonumber(A[7]) then verdict = 'block'
elseif viewers > tonumber(A[6]) then verdict = 'suspicious' end
redis.call('HINCRBY', K[4], verdict, 1)
redis.call('EXPIRE', K[4], A[4], 'NX')
return {verdict, viewers}`,
};

const REASONS: Record<Verdict, string> = {
  ok: '',
  bot: 'automation user agent',
  block: `more than ${BLOCK_ABOVE} viewers from one address today`,
  suspicious: `more than ${SUSPICIOUS_ABOVE} viewers from one address today`,
};

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
  // Per network, as the lockout counts: an IPv6 /64 is one viewer's address, however it rotates.
  const addressHash = (address: string) =>
    createHmac('sha256', deps.hashKey).update(clientNetwork(address)).digest('hex').slice(0, 12);
  const prefix = (scope: AppScope) => `svc:shield:${scope.appId}:${scope.mode}`;

  return {
    /** A signed verdict; the request's admission and every counter are one Redis round trip. */
    issueTicket: async (
      principal: Principal,
      input: { subject: string; scope: string },
      client: { address: string; userAgent: string },
      admit: (script: AdmissionScript, keys: string[], args: (string | number)[]) => Promise<unknown>,
    ) => {
      const settings = await deps.realtime.ensure(principal);
      const now = deps.clock.now();
      const hashed = addressHash(client.address);
      const day = utcDay(now);
      const base = prefix(principal);
      const [verdict] = (await admit(
        TICKET,
        [
          `svc:shield:rate:${hashed}:${Math.floor(now.getTime() / 60_000)}`,
          `${base}:viewers:${day}:${input.scope}:${hashed}`,
          `${base}:hits:${day}`,
          `${base}:verdicts:${day}`,
        ],
        [
          TICKETS_PER_MINUTE,
          input.subject,
          `${input.scope}\t${hashed}`,
          KEEP_SECONDS,
          AUTOMATION_USER_AGENT.test(client.userAgent) ? '1' : '0',
          SUSPICIOUS_ABOVE,
          BLOCK_ABOVE,
        ],
      )) as [Verdict | 'rate', number];
      if (verdict === 'rate')
        throw errors.rateLimited('More than 120 tickets a minute from this address', 60);
      const expiresAt = Math.floor(now.getTime() / 1000) + TICKET_TTL_SECONDS;
      const payload = Buffer.from(
        JSON.stringify({ a: principal.appId, s: input.subject, c: input.scope, v: verdict, e: expiresAt }),
      ).toString('base64url');
      return {
        ticket: `${payload}.${signTicketPayload(settings.shield_secret, payload)}`,
        verdict,
        reason: REASONS[verdict],
        expires_at: expiresAt,
      };
    },

    /**
     * The days' verdicts and busiest addresses in at most three Redis round trips (pipelines): the
     * days' verdicts and busiest pairs, the hits of the likeliest pairs in the days they were not
     * among the busiest read, then the busiest pairs' viewers of each day. Each command reads a
     * bounded part of a day, so a report never holds Redis for long (busiest.ts says why and how).
     */
    report: async (principal: AppScope, days: number) => {
      const base = prefix(principal);
      const hitsKey = (day: string) => `${base}:hits:${day}`;
      const dayList = lastDays(deps.clock.now(), days);
      const counters = deps.redis.pipeline();
      for (const day of dayList) {
        counters.hgetall(`${base}:verdicts:${day}`);
        counters.zrange(hitsKey(day), '0', String(BUSIEST_READ_PER_DAY - 1), 'REV', 'WITHSCORES');
      }
      const counted = await pipelined(counters);
      const verdicts = { ok: 0, suspicious: 0, bot: 0, block: 0 };
      const dayHitsRead = dayList.map((_, day) => {
        const counts = counted[2 * day] as Record<string, string>;
        for (const verdict of VERDICTS) verdicts[verdict] += Number(counts[verdict] ?? 0);
        return dayHits(counted[2 * day + 1] as string[], BUSIEST_READ_PER_DAY);
      });

      const likeliest = contenders(dayHitsRead, BUSIEST_ADDRESSES, BUSIEST_COMPLETED);
      const missing = dayList.map(() => [] as Contender[]);
      for (const contender of likeliest.contenders)
        for (const day of contender.missingDays) missing[day]!.push(contender);
      const lookups = deps.redis.pipeline();
      const lookedUp = missing.flatMap((pairs, day) => {
        if (pairs.length === 0) return [];
        lookups.zmscore(hitsKey(dayList[day]!), ...pairs.map((pair) => pair.member));
        return [pairs];
      });
      // With nothing to look up the pipeline is empty: ioredis answers [] without a round trip.
      const scores = (await pipelined(lookups)) as (string | null)[][];
      lookedUp.forEach((pairs, read) => {
        pairs.forEach((pair, i) => {
          pair.hits += Number(scores[read]![i] ?? 0);
        });
      });
      const busiest = rankBusiest(likeliest.contenders, BUSIEST_ADDRESSES).map(({ member, hits }) => {
        const [scope = '', address = ''] = member.split('\t');
        return { scope, address, hits };
      });
      const viewersRead = deps.redis.pipeline();
      for (const { scope, address } of busiest)
        for (const day of dayList) viewersRead.scard(`${base}:viewers:${day}:${scope}:${address}`);
      // With no busiest address the pipeline is empty: ioredis answers [] without a round trip.
      const viewers = (await pipelined(viewersRead)) as number[];
      const busiest_addresses = busiest.map(({ scope, address, hits: count }, rank) => ({
        scope,
        address,
        // The most viewers of any one day: viewers are counted per day.
        viewers: Math.max(0, ...viewers.slice(rank * dayList.length, (rank + 1) * dayList.length)),
        hits: count,
      }));
      return { verdicts, busiest_addresses };
    },
  };
}

export type ShieldService = ReturnType<typeof createShieldService>;
