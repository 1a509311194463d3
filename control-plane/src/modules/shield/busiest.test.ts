import { describe, expect, it } from 'vitest';
import { contenders, type DayHits, dayHits, rankBusiest } from './busiest.js';

/** A small deterministic generator, so a failure can be replayed. */
function random(seed: number) {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
}

/** Each day's hits by member, as the day's sorted set holds them. */
type Days = Map<string, number>[];

/** What a report reads of each day: its `limit` busiest, as ZRANGE … REV WITHSCORES answers. */
function read(days: Days, limit: number): DayHits[] {
  return days.map((day) => {
    const reply = [...day]
      .sort(([a, x], [b, y]) => y - x || (a < b ? 1 : -1))
      .slice(0, limit)
      .flatMap(([member, hits]) => [member, String(hits)]);
    return dayHits(reply, limit);
  });
}

/** The report's ranking: read, complete the contenders from the days themselves, rank. */
function report(days: Days, limit: number, keep: number, completed: number) {
  const likeliest = contenders(read(days, limit), keep, completed);
  const complete = likeliest.contenders.map((pair) => ({
    member: pair.member,
    hits: pair.hits + pair.missingDays.reduce((sum, day) => sum + (days[day]!.get(pair.member) ?? 0), 0),
  }));
  return { busiest: rankBusiest(complete, keep), othersAtMost: likeliest.othersAtMost };
}

/** The ranking from every pair of every day. */
function everyPair(days: Days, keep: number) {
  const totals = new Map<string, number>();
  for (const day of days)
    for (const [member, hits] of day) totals.set(member, (totals.get(member) ?? 0) + hits);
  return rankBusiest(
    [...totals].map(([member, hits]) => ({ member, hits })),
    keep,
  );
}

describe('the busiest pairs over several days, from each day’s busiest', () => {
  it('bounds what a day’s read left out by its lowest read hits, or by nothing when it read the whole day', () => {
    expect(dayHits(['a', '9', 'b', '4'], 2)).toEqual({
      read: new Map([
        ['a', 9],
        ['b', 4],
      ]),
      unreadAtMost: 4,
    });
    expect(dayHits(['a', '9', 'b', '4'], 3)).toEqual({
      read: new Map([
        ['a', 9],
        ['b', 4],
      ]),
      unreadAtMost: 0,
    });
    expect(dayHits([], 3)).toEqual({ read: new Map(), unreadAtMost: 0 });
  });

  it('adds a pair’s hits of the days where it was not among the busiest read', () => {
    // p is 11th on day 0 and below every read pair of day 1: only its day-1 hits put it first.
    const day0 = new Map([['p', 50], ...Array.from({ length: 10 }, (_, i) => [`busy${i}`, 52] as const)]);
    const day1 = new Map([
      ['p', 5],
      ...Array.from({ length: 30 }, (_, i) => [`tail${i}`, 5 + (i % 2)] as const),
    ]);
    const { busiest, othersAtMost } = report([day0, day1], 20, 10, 100);
    expect(busiest[0]).toEqual({ member: 'p', hits: 55 });
    expect(busiest).toEqual(everyPair([day0, day1], 10));
    expect(busiest[9]!.hits).toBeGreaterThanOrEqual(othersAtMost);
  });

  it('ranks exactly whenever its last pair has at least what any pair left out can have', () => {
    let exact = 0;
    for (let seed = 1; seed <= 300; seed += 1) {
      const next = random(seed);
      const pairs = 50 + Math.floor(next() * 400);
      // Skewed like real traffic: a few busy pairs, a long tail of one or two hits.
      const days: Days = Array.from({ length: 1 + Math.floor(next() * 30) }, () => {
        const day = new Map<string, number>();
        for (let i = 0; i < pairs; i += 1)
          if (next() < 0.6) day.set(`pair${i}`, Math.max(1, Math.floor((next() * 400) / (1 + i))));
        return day;
      });
      const limit = 5 + Math.floor(next() * 60);
      const { busiest, othersAtMost } = report(days, limit, 10, 10 + Math.floor(next() * 40));
      const truth = everyPair(days, 10);
      const last = busiest[busiest.length - 1];
      if (busiest.length === truth.length && last && last.hits >= othersAtMost) {
        exact += 1;
        expect(busiest.map((pair) => pair.hits)).toEqual(truth.map((pair) => pair.hits));
        // Members are the same but where an unread pair ties with the last one.
        const above = (ranking: typeof busiest) =>
          ranking.filter((pair) => pair.hits > last.hits).map((pair) => pair.member);
        expect(above(busiest)).toEqual(above(truth));
      }
    }
    // The test would say nothing if the bound never held: it holds for most skewed days.
    expect(exact).toBeGreaterThan(200);
  });

  it('stays within the pairs it completed when hits are spread evenly', () => {
    const days: Days = Array.from(
      { length: 30 },
      () => new Map(Array.from({ length: 100 }, (_, i) => [`pair${i}`, 1])),
    );
    const likeliest = contenders(read(days, 20), 10, 15);
    expect(likeliest.contenders).toHaveLength(15);
    // Each of the 30 days may hold one more hit of any pair it did not read.
    expect(likeliest.othersAtMost).toBe(30);
    for (const pair of likeliest.contenders)
      expect(pair.hits + pair.missingDays.length).toBeLessThanOrEqual(30);
  });
});
