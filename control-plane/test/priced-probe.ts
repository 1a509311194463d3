import type { FastifyPluginAsync } from 'fastify';
import { sql } from 'slonik';
import type { Container } from '../src/container.js';

/**
 * A priced endpoint the way product modules write one: the work (a row in a scratch table) and its
 * charge commit together. `fail=after-work` throws after the work, to prove nothing is charged.
 */
export async function createPricedProbeTable(container: Container): Promise<void> {
  await container.pool.query(sql.unsafe`
    create table if not exists test_priced_writes (id bigserial primary key, app_id text not null, note text)`);
}

export function pricedProbe(container: Container, product = 'writes', metric = 'calls'): FastifyPluginAsync {
  return async (app) => {
    app.post<{ Querystring: { fail?: string; note?: string } }>(
      '/test/priced',
      { config: { operation: 'test.priced' } },
      async (request) => {
        const principal = request.principal!;
        const { result, costMicros } = await container.billing.charge(
          principal,
          [{ product, metric, quantity: 1 }],
          async (tx) => {
            const id = await tx.oneFirst(sql.unsafe`
              insert into test_priced_writes (app_id, note) values (${principal.appId}, ${request.query.note ?? null})
              returning id`);
            if (request.query.fail === 'after-work') throw new Error('the call failed after its write');
            return id;
          },
        );
        request.costMicros = costMicros;
        return { id: String(result) };
      },
    );
    app.get(
      '/test/paid-plan-only',
      { config: { operation: 'test.paid', requiresPaidPlan: true } },
      async () => ({
        ok: true,
      }),
    );
  };
}
