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
  BUSIEST_READS_PER_DAY,
  SUSPICIOUS_ABOVE,
  TICKET_TTL_SECONDS,
  TICKETS_PER_MINUTE,
  VERDICTS,
  type Verdict,
} from './schema.js';
import { signTicketPayload } from './verify.js';

/** A report's reads of the days' busiest pairs, at most this many pairs in one pipeline. */
const PAIRS_READ_AT_ONCE = 6_000;

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
     * The days' verdicts and busiest addresses, mostly in three Redis round trips (pipelines): the
     * days' verdicts and busiest pairs, the other days' hits of the likeliest pairs, then the busiest
     * pairs' viewers of each day. A ranking that could not be exact reads each day deeper once first.
     * Each command reads a bounded part of a day, so a report never holds Redis for long (busiest.ts).
     */
    report: async (principal: AppScope, days: number) => {
      const base = prefix(principal);
      const hitsKey = (day: string) => `${base}:hits:${day}`;
      const dayList = lastDays(deps.clock.now(), days);
      const verdicts = { ok: 0, suspicious: 0, bot: 0, block: 0 };

      /** Ranks from each day's `limit` busiest pairs, counting the verdicts too when asked. */
      const rank = async (limit: number, countVerdicts: boolean) => {
        // Redis answers a pipeline's commands one after another, serving no one else in between: a
        // deeper read goes as several pipelines of a few days each.
        const daysAtOnce = Math.max(1, Math.floor(PAIRS_READ_AT_ONCE / limit));
        const replies: unknown[] = [];
        for (let from = 0; from < dayList.length; from += daysAtOnce) {
          const reads = deps.redis.pipeline();
          for (const day of dayList.slice(from, from + daysAtOnce)) {
            if (countVerdicts) reads.hgetall(`${base}:verdicts:${day}`);
            // One more than the day's busiest: the busiest pair the read leaves out bounds the others.
            reads.zrange(hitsKey(day), '0', String(limit), 'REV', 'WITHSCORES');
          }
          replies.push(...(await pipelined(reads)));
        }
        const perDay = countVerdicts ? 2 : 1;
        const read = dayList.map((_, day) => {
          if (countVerdicts) {
            const counts = replies[perDay * day] as Record<string, string>;
            for (const verdict of VERDICTS) verdicts[verdict] += Number(counts[verdict] ?? 0);
          }
          return dayHits(replies[perDay * day + perDay - 1] as string[], limit);
        });
        const likeliest = contenders(read, BUSIEST_ADDRESSES, BUSIEST_COMPLETED);
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
        const completed = likeliest.contenders.map((pair) => ({ member: pair.member, hits: pair.hits }));
        const byMember = new Map(completed.map((pair) => [pair.member, pair]));
        lookedUp.forEach((pairs, lookup) => {
          pairs.forEach((pair, i) => {
            byMember.get(pair.member)!.hits += Number(scores[lookup]![i] ?? 0);
          });
        });
        return rankBusiest(completed, BUSIEST_ADDRESSES, likeliest.othersAtMost);
      };

      const [shallow, deep] = BUSIEST_READS_PER_DAY;
      let ranking = await rank(shallow, true);
      if (!ranking.exact) ranking = await rank(deep, false);
      const busiest = ranking.busiest.map(({ member, hits }) => {
        // The address is the last field: a scope may hold a tab of its own.
        const split = member.lastIndexOf('\t');
        return { scope: member.slice(0, split), address: member.slice(split + 1), hits };
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
