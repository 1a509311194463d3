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

/**
 * An account's org usage two ways, which must agree line for line: every org's lines summed, and the
 * lines of all orgs together that the account's report reads (migration 0033). Read in one snapshot.
 */
export async function orgUsageBothWays(container: Container, accountId: string) {
  const lines = (from: ReturnType<typeof sql.fragment>) => sql.fragment`
    (select coalesce(jsonb_agg(line order by line::text), '[]') from (
       select mode, day, product, metric, price_micros, unit_size, sum(quantity) as quantity,
              sum(billable_quantity) as billable_quantity, sum(cost_micros) as cost_micros
       from ${from}
       group by mode, day, product, metric, price_micros, unit_size) line)::text`;
  return container.pool.one(
    sql.type(z.object({ byOrg: z.string(), allOrgs: z.string() }))`
      select
        ${lines(sql.fragment`usage_daily where account_id = ${accountId} and org_id <> ''`)} as "byOrg",
        ${lines(sql.fragment`usage_all_orgs_daily where account_id = ${accountId}`)} as "allOrgs"`,
  );
}

/** An account's live sessions (of one identity, when given), by identity then join. */
export async function liveSessionsOf(container: Container, accountId: string, identity?: string) {
  return container.pool.any(
    sql.type(
      z.object({
        identity: z.string(),
        joined_at: z.date(),
        last_seen_at: z.date(),
        missing_since: z.date().nullable(),
        left_at: z.date().nullable(),
        billed_seconds: z.number().nullable(),
      }),
    )`
      select identity, joined_at, last_seen_at, missing_since, left_at, billed_seconds from live_sessions
      where account_id = ${accountId} and (${identity ?? null}::text is null or identity = ${identity ?? null})
      order by identity, joined_at`,
  );
}

/** The quantity an app has used of a product (of one metric, or of all), all days together. */
export async function usedQuantity(container: Container, appId: string, product: string, metric?: string) {
  return container.pool.oneFirst(
    sql.type(z.object({ quantity: z.number() }))`
      select coalesce(sum(quantity), 0)::int as quantity from usage_daily
      where app_id = ${appId} and product = ${product}
        and (${metric ?? null}::text is null or metric = ${metric ?? null})`,
  );
}

export async function storageObjectCount(container: Container, appId: string): Promise<number> {
  return container.pool.oneFirst(
    sql.type(z.object({ count: z.number() }))`
      select count(*)::int as count from storage_objects where app_id = ${appId}`,
  );
}
