import { Type } from '@sinclair/typebox';
import { sql } from 'slonik';
import type { Container } from '../src/container.js';
import { route } from '../src/platform/route.js';

/**
 * A priced operation declared the way product modules declare one: its work (a row in a scratch
 * table) and its charge commit together. `fail=after-work` throws after the work, to prove nothing is
 * charged (`fail=before-work` throws before it). The same write taken in turns (`chargedTogether`).
 * A priced operation that writes nothing (as a signed read URL), charged on its own. And an
 * operation the Free plan may not call.
 */
export async function createPricedProbeTable(container: Container): Promise<void> {
  await container.pool.query(sql.unsafe`
    create table if not exists test_priced_writes (id bigserial primary key, app_id text not null, note text)`);
}

export function pricedProbe(product = 'writes', metric = 'calls') {
  const write = (operationId: string, url: string, summary: string, chargedTogether?: true) =>
    route({
      operationId,
      method: 'POST',
      url,
      auth: 'secret-key',
      tags: ['test'],
      summary,
      hidden: true,
      query: Type.Object({ fail: Type.Optional(Type.String()), note: Type.Optional(Type.String()) }),
      response: Type.Object({ id: Type.String() }),
      price: { product, metric },
      ...(chargedTogether ? { chargedTogether } : {}),
      handler: async ({ caller, query, tx }) => {
        if (query.fail === 'before-work') throw new Error('the call failed before its write');
        const id = await tx.oneFirst(sql.unsafe`
          insert into test_priced_writes (app_id, note) values (${caller.appId}, ${query.note ?? null})
          returning id`);
        if (query.fail === 'after-work') throw new Error('the call failed after its write');
        return { id: String(id) };
      },
    });
  return [
    write('test.priced', '/test/priced', 'A priced write'),
    write(
      'test.priced-together',
      '/test/priced-together',
      'A priced write whose live calls share transactions in turns',
      true,
    ),
    route({
      operationId: 'test.priced-read',
      method: 'GET',
      url: '/test/priced-read',
      auth: 'secret-key',
      tags: ['test'],
      summary: 'A priced call that writes nothing',
      hidden: true,
      response: Type.Object({ ok: Type.Boolean() }),
      price: { product, metric },
      handler: async () => ({ ok: true }),
    }),
    route({
      operationId: 'test.paid',
      method: 'GET',
      url: '/test/paid-plan-only',
      auth: 'secret-key',
      tags: ['test'],
      summary: 'A paid-plan operation',
      hidden: true,
      paidPlan: true,
      response: Type.Object({ ok: Type.Boolean() }),
      handler: async () => ({ ok: true }),
    }),
  ];
}
