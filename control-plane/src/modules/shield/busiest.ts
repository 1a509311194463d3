/**
 * The busiest (scope, address) pairs over several days, from each day's busiest alone: a day's hits
 * are a sorted set that a busy app fills with every pair of the day, far too many to read whole (a
 * 30-day report that read 5,000 pairs a day whole held Redis from every other request for 78–110 ms,
 * and at 20,000 a day it outran the command timeout).
 *
 * What is read of each day bounds what is not: a pair missing from a day's read has at most the hits
 * of the first pair the read left out (none, when it left none). So each pair read somewhere has at
 * least the sum of its read days, and at most that plus every other day's bound; a pair read nowhere
 * has at most the sum of the bounds. The likeliest pairs are completed by looking their missing days
 * up, and the ranking is exact when its last pair has at least what any pair not completed can have
 * (a variant of Fagin's threshold test). That holds whenever the busiest stand out from each day's
 * read; a report that does not meet it reads deeper once, and then ranks the pairs it completed.
 */

/** One day's busiest pairs as read, and the most hits any pair missing from them has that day. */
export interface DayHits {
  read: ReadonlyMap<string, number>;
  unreadAtMost: number;
}

/** A pair that may rank: its hits in the days it was read (then all of them), and the days to look up. */
export interface Contender {
  member: string;
  hits: number;
  missingDays: number[];
}

/**
 * A day's `limit` busiest pairs from a read of one more (member, score, member, score…, busiest
 * first): the one more, when the day has it, is the busiest pair left out.
 */
export function dayHits(reply: readonly string[], limit: number): DayHits {
  const read = new Map<string, number>();
  for (let i = 0; i < Math.min(reply.length, 2 * limit); i += 2) read.set(reply[i]!, Number(reply[i + 1]));
  return { read, unreadAtMost: reply.length > 2 * limit ? Number(reply[2 * limit + 1]) : 0 };
}

/**
 * The pairs likeliest to be among the `keep` busiest (by the most they can have), `completed` of them
 * and at least `keep`, to be looked up in their missing days; and the most hits any other pair can
 * have, read or not.
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
    // A pair read anywhere has at least its day's bound there, so it can have at least unreadTotal.
    othersAtMost: ranked[completing.length]?.[1].most ?? unreadTotal,
  };
}

/**
 * The `keep` busiest of the completed pairs, most hits first (equal hits by member), and whether no
 * pair left out can have more than the last of them.
 */
export function rankBusiest(
  completed: readonly { member: string; hits: number }[],
  keep: number,
  othersAtMost: number,
): { busiest: { member: string; hits: number }[]; exact: boolean } {
  const busiest = [...completed]
    .sort((a, b) => b.hits - a.hits || compare(a.member, b.member))
    .slice(0, keep);
  const last = busiest[keep - 1];
  return { busiest, exact: last ? last.hits >= othersAtMost : othersAtMost === 0 };
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
