import { sql } from 'slonik';
import { z } from 'zod';
import type { Container } from '../src/container.js';

/**
 * What must always agree for a live account: the balance and the sum of its ledger, and the cost of
 * its live usage and the sum of its usage lines (read in one snapshot).
 */
export async function ledgerTotals(container: Container, accountId: string) {
  return container.pool.one(
    sql.type(
      z.object({ balance: z.number(), ledger: z.number(), usageCost: z.number(), usageLines: z.number() }),
    )`
      select
        (select balance_micros from accounts where id = ${accountId}) as balance,
        (select coalesce(sum(amount_micros), 0) from ledger_entries where account_id = ${accountId})::bigint as ledger,
        (select coalesce(sum(cost_micros), 0) from usage_daily
          where account_id = ${accountId} and mode = 'live')::bigint as "usageCost",
        (select coalesce(-sum(amount_micros), 0) from ledger_entries
          where account_id = ${accountId} and kind = 'usage')::bigint as "usageLines"`,
  );
}
