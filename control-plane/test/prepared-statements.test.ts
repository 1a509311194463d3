import { type DatabasePool, type QuerySqlToken, sql } from 'slonik';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { startTestApp, type TestContext } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

const Answer = z.object({ n: z.number() });
const Statement = z.object({ statement: z.string() });

it('prepares a statement on a connection that runs it again, with the same answers and errors', async () => {
  await ctx.container.pool.connect(async (connection) => {
    const divide = (by: number) =>
      connection.oneFirst(sql.type(Answer)`select 84 / ${by}::int as n -- prepared-statements test`);
    expect([await divide(2), await divide(4), await divide(7)]).toEqual([42, 21, 12]);
    const prepared = await connection.anyFirst(sql.type(Statement)`
      select statement from pg_prepared_statements where statement like ${'%prepared-statements test%'}`);
    expect(prepared).toHaveLength(1);
    // A prepared statement's error is the statement's, and the next run is fine.
    await expect(divide(0)).rejects.toThrow(/division by zero/);
    expect(await divide(84)).toBe(1);
  });
});

const Plans = z.object({ generic_plans: z.number(), custom_plans: z.number() });

it('plans every run of a prepared statement for its values on the search pool, and only there', async () => {
  /** Runs a statement of one connection of `pool` eight times; how PostgreSQL planned it. */
  const plansOf = (
    pool: DatabasePool,
    mark: string,
    length: (term: string) => QuerySqlToken<typeof Answer>,
  ) =>
    pool.connect(async (connection) => {
      const lengths: number[] = [];
      for (const term of ['a', 'ab', 'abc', 'abcd', 'abcde', 'abcdef', 'abcdefg', 'abcdefgh'])
        lengths.push(await connection.oneFirst(length(term)));
      expect(lengths).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      return connection.one(sql.type(Plans)`
        select generic_plans, custom_plans from pg_prepared_statements where statement like ${`%${mark}%`}`);
    });
  // Prepared from its second run on, as elsewhere: seven runs of the prepared statement.
  const search = await plansOf(
    ctx.container.searchPool,
    'search-pool test',
    (term) => sql.type(Answer)`select length(${term}) as n -- search-pool test`,
  );
  expect(search).toEqual({ generic_plans: 0, custom_plans: 7 });
  // Elsewhere PostgreSQL settles on the generic plan after five.
  const main = await plansOf(
    ctx.container.pool,
    'main-pool test',
    (term) => sql.type(Answer)`select length(${term}) as n -- main-pool test`,
  );
  expect(main).toEqual({ generic_plans: 2, custom_plans: 5 });
});
