import { sql } from 'slonik';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { plannedForItsValues } from '../src/platform/transaction.js';
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
    // A statement marked so is planned for its values on every run, never prepared.
    const search = (term: string) =>
      connection.oneFirst(
        sql.type(Answer)`${plannedForItsValues} select length(${term}) as n -- unprepared-statements test`,
      );
    expect([await search('a'), await search('ab'), await search('abc')]).toEqual([1, 2, 3]);
    const unprepared = await connection.anyFirst(sql.type(Statement)`
      select statement from pg_prepared_statements where statement like ${'%unprepared-statements test%'}`);
    expect(unprepared).toEqual([]);
  });
});
