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

/** What a report reads of each day: its `limit` busiest and one more, as ZRANGE … REV WITHSCORES answers. */
function read(days: Days, limit: number): DayHits[] {
  return days.map((day) => {
    const reply = [...day]
      .sort(([a, x], [b, y]) => y - x || (a < b ? 1 : -1))
      .slice(0, limit + 1)
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
  return rankBusiest(complete, keep, likeliest.othersAtMost);
}

/** The ranking from every pair of every day. */
function everyPair(days: Days, keep: number) {
  const totals = new Map<string, number>();
  for (const day of days)
    for (const [member, hits] of day) totals.set(member, (totals.get(member) ?? 0) + hits);
  return rankBusiest(
    [...totals].map(([member, hits]) => ({ member, hits })),
    keep,
    0,
  ).busiest;
}

describe('the busiest pairs over several days, from each day’s busiest', () => {
  it('bounds what a day’s read left out by the busiest pair it left out, or by nothing', () => {
    const read = new Map([
      ['a', 9],
      ['b', 4],
    ]);
    expect(dayHits(['a', '9', 'b', '4', 'c', '3'], 2)).toEqual({ read, unreadAtMost: 3 });
    expect(dayHits(['a', '9', 'b', '4'], 2)).toEqual({ read, unreadAtMost: 0 });
    expect(dayHits(['a', '9', 'b', '4'], 3)).toEqual({ read, unreadAtMost: 0 });
    expect(dayHits([], 3)).toEqual({ read: new Map(), unreadAtMost: 0 });
  });

  it('adds a pair’s hits of the days where it was not among the busiest read', () => {
    // p is 11th on day 0 and below every read pair of day 1: only its day-1 hits put it first.
    const day0 = new Map([['p', 50], ...Array.from({ length: 10 }, (_, i) => [`busy${i}`, 52] as const)]);
    const day1 = new Map([
      ['p', 5],
      ...Array.from({ length: 30 }, (_, i) => [`tail${i}`, 5 + (i % 2)] as const),
    ]);
    const { busiest, exact } = report([day0, day1], 20, 10, 100);
    expect(busiest[0]).toEqual({ member: 'p', hits: 55 });
    expect(busiest).toEqual(everyPair([day0, day1], 10));
    expect(exact).toBe(true);
  });

  it('does not call a ranking exact that a read pair it did not complete could beat', () => {
    const pairs = (prefix: string, count: number, hits: number) =>
      Array.from({ length: count }, (_, i) => [`${prefix}${String(i).padStart(3, '0')}`, hits] as const);
    // Day 0 reads the p and m pairs and leaves the c pairs out (at most 50); day 1 reads the c and q
    // pairs and leaves o000 (60) and p000-p009 (30) out. The p pairs can have the most (140) and are
    // completed: p000-p009 have 110, as much as a pair read nowhere can have. But the c pairs, read on
    // day 1 only and not completed, have 120.
    const day0 = new Map([...pairs('p', 100, 80), ...pairs('m', 100, 50), ...pairs('c', 10, 50)]);
    const day1 = new Map([
      ...pairs('c', 10, 70),
      ...pairs('q', 190, 60),
      ...pairs('o', 1, 60),
      ...pairs('p', 10, 30),
    ]);
    const shallow = report([day0, day1], 200, 10, 100);
    expect(shallow.busiest[9]).toEqual({ member: 'p009', hits: 110 });
    expect(shallow.exact).toBe(false);
    // Read deeper, as a report then does, the ranking is the whole days' one.
    const deep = report([day0, day1], 1_000, 10, 100);
    expect(deep.exact).toBe(true);
    expect(deep.busiest).toEqual(everyPair([day0, day1], 10));
    expect(deep.busiest[0]).toEqual({ member: 'c000', hits: 120 });
  });

  it('ranks exactly whenever it says so, and says so for most skewed days', () => {
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
      const { busiest, exact: claimed } = report(days, limit, 10, 10 + Math.floor(next() * 40));
      const truth = everyPair(days, 10);
      const last = busiest[busiest.length - 1];
      if (claimed && last) {
        exact += 1;
        expect(busiest.map((pair) => pair.hits)).toEqual(truth.map((pair) => pair.hits));
        // Members are the same but where an unread pair ties with the last one.
        const above = (ranking: typeof busiest) =>
          ranking.filter((pair) => pair.hits > last.hits).map((pair) => pair.member);
        expect(above(busiest)).toEqual(above(truth));
      }
    }
    // The test would say nothing if the bound never held.
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
