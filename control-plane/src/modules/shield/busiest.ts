/**
 * The busiest (scope, address) pairs over several days, from each day's busiest alone: a day's hits
 * are a sorted set that a busy app fills with every pair of the day, far too many to read whole (a
 * read of 30 days of 5,000 pairs held Redis for 0.3–0.7 s, and of 20,000 outran the command timeout).
 *
 * What is read of each day bounds what is not: a pair missing from a day's read has at most that day's
 * lowest read hits there (none, when the read held the whole day). So each pair read somewhere has at
 * least the sum of its read days, and at most that plus every other day's bound; a pair read nowhere
 * has at most the sum of the bounds. The pairs that can still rank are completed by looking their
 * missing days up. The ranking is exact when its last pair has at least what any other pair can have
 * (Fagin's threshold test), which holds whenever the busiest stand out from each day's read; when
 * hits are spread so evenly that it does not, the busiest are those of the pairs completed.
 */

/** One day's busiest pairs as read, and the most hits any pair missing from them has that day. */
export interface DayHits {
  read: ReadonlyMap<string, number>;
  unreadAtMost: number;
}

/** A pair that may rank: its hits in the days it was read, and the days still to look up. */
export interface Contender {
  member: string;
  hits: number;
  missingDays: number[];
}

/** A day's read (member, score, member, score…) as DayHits: a read of `limit` pairs may have left some. */
export function dayHits(reply: readonly string[], limit: number): DayHits {
  const read = new Map<string, number>();
  for (let i = 0; i < reply.length; i += 2) read.set(reply[i]!, Number(reply[i + 1]));
  const pairs = reply.length / 2;
  return { read, unreadAtMost: pairs < limit ? 0 : Number(reply[reply.length - 1]) };
}

/**
 * The `completed` pairs likeliest to be among the `keep` busiest (by the most they can have), to be
 * looked up in their missing days, and the most hits any other pair can have.
 */
export function contenders(
  days: readonly DayHits[],
  keep: number,
  completed: number,
): { contenders: Contender[]; othersAtMost: number } {
  const unreadTotal = days.reduce((sum, day) => sum + day.unreadAtMost, 0);
  const pairs = new Map<string, { least: number; most: number; readIn: Set<number> }>();
  days.forEach((day, index) => {
    for (const [member, hits] of day.read) {
      const pair = pairs.get(member) ?? { least: 0, most: unreadTotal, readIn: new Set<number>() };
      pair.least += hits;
      // Read that day: its hits there are known, not bounded.
      pair.most += hits - day.unreadAtMost;
      pair.readIn.add(index);
      pairs.set(member, pair);
    }
  });
  const ranked = [...pairs].sort(([a, x], [b, y]) => y.most - x.most || y.least - x.least || compare(a, b));
  const completing = ranked.slice(0, Math.max(keep, completed));
  return {
    contenders: completing.map(([member, pair]) => ({
      member,
      hits: pair.least,
      missingDays: days.flatMap((day, index) =>
        pair.readIn.has(index) || day.unreadAtMost === 0 ? [] : [index],
      ),
    })),
    othersAtMost: Math.max(unreadTotal, ranked[completing.length]?.[1].most ?? 0),
  };
}

/** The `keep` busiest of the completed pairs: most hits first, equal hits by member. */
export function rankBusiest(
  completed: readonly { member: string; hits: number }[],
  keep: number,
): { member: string; hits: number }[] {
  return [...completed].sort((a, b) => b.hits - a.hits || compare(a.member, b.member)).slice(0, keep);
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
