import type { FastifyInstance } from 'fastify';
import { sql } from 'slonik';
import type { Container } from '../src/container.js';
import { statement } from '../src/db/transaction.js';
import { inTransaction } from '../src/platform/transaction.js';

/**
 * The floors the benchmarks compare against, mounted on the same fastify app, pool and Redis client
 * as the API but without its pipeline: (a) one INSERT in one transaction, (b) one Redis write.
 */
export async function mountFloors(app: FastifyInstance, container: Container): Promise<void> {
  await container.pool.query(
    sql.unsafe`create table if not exists bench_floor (id bigserial primary key, note text)`,
  );
  app.post('/bench/floor/insert', async () => {
    await inTransaction(container.pool, (tx) =>
      tx.query(statement`insert into bench_floor (note) values ('x')`),
    );
    return { ok: true };
  });
  let key = 0;
  app.post('/bench/floor/redis', async () => {
    await container.redis.set(`bench:floor:${key++ % 10_000}`, 'x', 'EX', 60);
    return { ok: true };
  });
}
