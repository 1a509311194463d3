import { sql } from 'slonik';
import { z } from 'zod';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import { LedgerEntryRow } from './schema.js';

/** An account's balance.low threshold: its own, else the operator's default; 0 means never. */
const thresholdOf = (defaultMicros: number) =>
  sql.fragment`coalesce(low_balance_threshold_micros, ${defaultMicros})`;

const ledgerColumns = sql.fragment`
  id, account_id, kind, amount_micros, reference, balance_after_micros, app_id, to_char(day, 'YYYY-MM-DD') as day,
  created_at, updated_at`;

/** A usage line of a day, product and metric (summed over its prices and orgs). */
const UsageDayRow = z.object({
  day: z.string(),
  product: z.string(),
  metric: z.string(),
  quantity: z.number().int(),
  billable_quantity: z.number().int(),
  cost_micros: z.number().int(),
});

/** SQL of balances and the append-only ledger. */
export function billingStore(db: Db) {
  return {
    /** Locks the account row for the rest of the transaction: balance changes are serialised per account. */
    lockBalance: (accountId: string) =>
      db.maybeOneFirst(
        sql.type(z.object({ balance_micros: z.number().int() }))`
          select balance_micros from accounts where id = ${accountId} for no key update`,
      ),

    readBalance: (accountId: string) =>
      db.maybeOneFirst(
        sql.type(z.object({ balance_micros: z.number().int() }))`
          select balance_micros from accounts where id = ${accountId}`,
      ),

    /** Adds to the balance (a top-up); returns the balance and its version after. */
    addToBalance: async (accountId: string, amountMicros: number) => {
      const row = await db.one(
        sql.type(z.object({ balance_micros: z.number().int(), balance_version: z.number().int() }))`
          update accounts set balance_micros = balance_micros + ${amountMicros}, balance_version = balance_version + 1
          where id = ${accountId} returning balance_micros, balance_version`,
      );
      return { balance: row.balance_micros, version: row.balance_version };
    },

    findTopUp: (accountId: string, reference: string) =>
      db.maybeOne(sql.type(LedgerEntryRow)`
        select ${ledgerColumns} from ledger_entries
        where account_id = ${accountId} and kind = 'topup' and reference = ${reference}`),

    insertTopUp: (entry: {
      id: string;
      accountId: string;
      amountMicros: number;
      reference: string;
      balanceAfter: number;
      at: Date;
    }) =>
      db.one(sql.type(LedgerEntryRow)`
        insert into ledger_entries (id, account_id, kind, amount_micros, reference, balance_after_micros, created_at, updated_at)
        values (${entry.id}, ${entry.accountId}, 'topup', ${entry.amountMicros}, ${entry.reference},
                ${entry.balanceAfter}, ${sql.timestamp(entry.at)}, ${sql.timestamp(entry.at)})
        returning ${ledgerColumns}`),

    latestEntries: (accountId: string, limit: number) =>
      db.any(sql.type(LedgerEntryRow)`
        select ${ledgerColumns} from ledger_entries where account_id = ${accountId}
        order by updated_at desc, id desc limit ${limit}`),

    allowanceUsed: (accountId: string, mode: string, month: string) =>
      db.any(
        sql.type(z.object({ product: z.string(), metric: z.string(), used: z.number().int() }))`
          select product, metric, used from allowance_usage
          where account_id = ${accountId} and mode = ${mode} and month = ${month}`,
      ),

    /**
     * The usage lines of orgs (their ids) from `fromDay` to `toDay` (UTC, both included), per org, day,
     * product and metric, with the list price: what the quantity costs before any free allowance.
     * `org_id <> ''` says what the org index covers, which the planner cannot see in a list of ids.
     */
    orgUsageByDay: (
      accountId: string,
      mode: string,
      orgIds: readonly string[],
      fromDay: string,
      toDay: string,
    ) =>
      db.any(
        sql.type(UsageDayRow.extend({ org_id: z.string(), list_micros: z.number().int() }))`
          select org_id, to_char(day, 'YYYY-MM-DD') as day, product, metric, sum(quantity)::bigint as quantity,
                 sum(billable_quantity)::bigint as billable_quantity, sum(cost_micros)::bigint as cost_micros,
                 sum(floor(quantity::numeric * price_micros / unit_size))::bigint as list_micros
          from usage_daily
          where org_id = any(${sql.array(orgIds, 'text')}) and org_id <> '' and account_id = ${accountId} and mode = ${mode}
            and day between ${fromDay} and ${toDay}
          group by org_id, day, product, metric
          order by day desc, product, metric`,
      ),

    /**
     * The account's usage from `fromDay` on, per day, product and metric: each app's own lines and its
     * line of all its orgs together (migration 0033), not every org's.
     */
    usageByDay: (accountId: string, mode: string, fromDay: string) =>
      db.any(
        sql.type(UsageDayRow)`
          select to_char(day, 'YYYY-MM-DD') as day, product, metric, sum(quantity)::bigint as quantity,
                 sum(billable_quantity)::bigint as billable_quantity, sum(cost_micros)::bigint as cost_micros
          from (select day, product, metric, quantity, billable_quantity, cost_micros from usage_daily
                where account_id = ${accountId} and mode = ${mode} and day >= ${fromDay} and org_id = ''
                union all
                select day, product, metric, quantity, billable_quantity, cost_micros from usage_all_orgs_daily
                where account_id = ${accountId} and mode = ${mode} and day >= ${fromDay}) lines
          group by day, product, metric
          order by day desc, product, metric`,
      ),

    /**
     * Disarms the armed balances under their threshold and answers them with their apps: each is told
     * once per fall.
     */
    disarmLowBalances: (defaultMicros: number) =>
      db.any(
        sql.type(
          z.object({
            account_id: z.string(),
            balance_micros: z.number().int(),
            threshold_micros: z.number().int(),
            app_id: z.string(),
          }),
        )`
          with fallen as (
            update accounts set balance_low_armed = false
            where balance_low_armed and ${thresholdOf(defaultMicros)} > 0
              and balance_micros < ${thresholdOf(defaultMicros)}
            returning id, balance_micros, ${thresholdOf(defaultMicros)} as threshold_micros
          )
          select fallen.id as account_id, fallen.balance_micros, fallen.threshold_micros, apps.id as app_id
          from fallen join apps on apps.account_id = fallen.id
          order by apps.id`,
      ),

    /** Arms the balances at or above their threshold again. */
    armBalances: (defaultMicros: number) =>
      db.query(sql.unsafe`
        update accounts set balance_low_armed = true
        where not balance_low_armed and balance_micros >= ${thresholdOf(defaultMicros)}`),

    /** The account's own threshold (null: the operator's default); a new value re-arms the event. */
    setLowBalanceThreshold: (accountId: string, micros: number | null) =>
      db.maybeOneFirst(sql.type(z.object({ id: z.string() }))`
        update accounts
        set balance_low_armed = balance_low_armed or low_balance_threshold_micros is distinct from ${micros},
            low_balance_threshold_micros = ${micros}
        where id = ${accountId} returning id`),

    lowBalanceThreshold: (accountId: string) =>
      db.maybeOne(sql.type(z.object({ threshold_micros: z.number().int().nullable() }))`
        select low_balance_threshold_micros as threshold_micros from accounts where id = ${accountId}`),

    /** Ledger entries newest first (by creation), after a page's last one. */
    ledgerPage: (accountId: string, limit: number, after?: Position) =>
      db.any(sql.type(LedgerEntryRow)`
        select ${ledgerColumns} from ledger_entries
        where account_id = ${accountId}
          ${after ? sql.fragment`and (created_at, id) < (${sql.timestamp(after.createdAt)}, ${after.id})` : sql.fragment``}
        order by created_at desc, id desc limit ${limit}`),
  };
}
