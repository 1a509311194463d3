import { type DatabasePool, sql } from 'slonik';
import type { KeyMode } from '../../platform/caller.js';
import { type Clock, utcDay } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors, ServiceError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { formatUsd } from '../../platform/money.js';
import type { Outbox } from '../../platform/outbox.js';
import { metricKey } from '../../platform/price-catalogue.js';
import { inUnits, type Prices, type PriceTable } from '../../platform/prices.js';
import type { Standing } from '../../platform/standing.js';
import { inTransaction } from '../../platform/transaction.js';
import { presentPriceTable } from '../pricing/service.js';
import { LEDGER_WINDOW, type LedgerEntryRow, MAX_USAGE_DAYS } from './schema.js';
import { billingStore } from './store.js';

/** USD as a JSON number: exact to the micro-dollar because it is parsed from the formatted decimal. */
export const usdNumber = (micros: number) => Number(formatUsd(micros));

/** A usage line in the priced unit, with its cost. */
function presentUsage(
  table: PriceTable,
  row: {
    day: string;
    product: string;
    metric: string;
    quantity: number;
    billable_quantity: number;
    cost_micros: number;
  },
) {
  const price = table.get(metricKey(row.product, row.metric));
  const unitSize = price?.unitSize ?? 1;
  return {
    day: row.day,
    product: row.product,
    metric: row.metric,
    unit: price?.unit ?? 'unit',
    quantity: inUnits(row.quantity, unitSize),
    billable_quantity: inUnits(row.billable_quantity, unitSize),
    cost_usd: usdNumber(row.cost_micros),
    cost_micros: row.cost_micros,
  };
}

const monthOf = (day: string) => `${day.slice(0, 7)}-01`;

function presentEntry(entry: LedgerEntryRow) {
  return {
    id: entry.id,
    kind: entry.kind,
    amount_usd: usdNumber(entry.amount_micros),
    amount_micros: entry.amount_micros,
    balance_after_usd: usdNumber(entry.balance_after_micros),
    reference: entry.reference,
    app_id: entry.app_id,
    day: entry.day,
    created_at: entry.created_at.toISOString(),
    updated_at: entry.updated_at.toISOString(),
  };
}

export function createBillingService(deps: {
  pool: DatabasePool;
  clock: Clock;
  prices: Prices;
  standing: Standing;
  outbox: Outbox;
  cursors: Cursors;
  onError?: (error: unknown) => void;
}) {
  return {
    /**
     * balance.low to the live endpoints of every app of each account whose balance fell under its
     * threshold since it was last at or above it (checked every few seconds, not at each charge, so
     * that the charge path stays one statement). An account's threshold is its own (the dashboard's)
     * or `defaultMicros`; 0 turns it off. Answers how many accounts were told.
     */
    notifyLowBalances: async (defaultMicros: number): Promise<number> => {
      return inTransaction(deps.pool, async (tx) => {
        const store = billingStore(tx);
        const fallen = await store.disarmLowBalances(defaultMicros);
        for (const { account_id, balance_micros, threshold_micros: thresholdMicros, app_id } of fallen) {
          await deps.outbox.emit(tx, {
            appId: app_id,
            mode: 'live',
            type: 'balance.low',
            data: {
              account_id,
              balance_usd: usdNumber(balance_micros),
              balance_micros,
              threshold_usd: usdNumber(thresholdMicros),
              threshold_micros: thresholdMicros,
            },
          });
        }
        await store.armBalances(defaultMicros);
        return new Set(fallen.map((row) => row.account_id)).size;
      });
    },

    /**
     * Adds money to an account. Idempotent on the caller's reference: a replay returns the first
     * entry and adds nothing, even when both run at once (the row lock serialises them).
     */
    topUp: async (input: { accountId: string; amountMicros: number; reference: string }) => {
      if (!Number.isSafeInteger(input.amountMicros) || input.amountMicros <= 0) {
        throw new ServiceError(
          'invalid_request',
          'a top-up must be a positive whole number of micro-dollars',
        );
      }
      if (input.reference.trim() === '')
        throw new ServiceError('invalid_request', 'a top-up needs a reference');
      return inTransaction(
        deps.pool,
        async (tx) => {
          const store = billingStore(tx);
          if ((await store.lockBalance(input.accountId)) === null)
            throw errors.notFound(`Account ${input.accountId}`);
          const earlier = await store.findTopUp(input.accountId, input.reference);
          if (earlier) {
            if (earlier.amount_micros !== input.amountMicros) {
              throw errors.conflict(`reference ${input.reference} was already used for a different amount`);
            }
            return { entry: earlier, replayed: true };
          }
          const { balance, version } = await store.addToBalance(input.accountId, input.amountMicros);
          // An owed balance repaid, or a balance made: mints and logins work again at once.
          tx.afterCommit(() => deps.standing.record(input.accountId, balance, version));
          const entry = await store.insertTopUp({
            id: newId('led'),
            accountId: input.accountId,
            amountMicros: input.amountMicros,
            reference: input.reference,
            balanceAfter: balance,
            at: deps.clock.now(),
          });
          return { entry, replayed: false };
        },
        deps.onError,
      );
    },

    /** Every movement of the balance, newest first, a page at a time. */
    ledger: async (accountId: string, query: { limit: number; cursor?: string }) => {
      const after = deps.cursors.decode(query.cursor);
      const rows = await billingStore(deps.pool).ledgerPage(accountId, query.limit + 1, after);
      return deps.cursors.page(rows, query.limit, presentEntry);
    },

    /**
     * The account's balance.low threshold: its own, or null when it takes the operator's default.
     * A new value re-arms the event, so that a balance already under it is told at once (saving the
     * same value again tells nothing new).
     */
    lowBalanceThreshold: async (accountId: string) => {
      const row = await billingStore(deps.pool).lowBalanceThreshold(accountId);
      if (!row) throw errors.notFound(`Account ${accountId}`);
      return row.threshold_micros;
    },

    setLowBalanceThreshold: async (accountId: string, micros: number | null) => {
      if (micros !== null && (!Number.isSafeInteger(micros) || micros < 0))
        throw errors.invalidField(
          'body',
          'threshold',
          'must be a positive amount of dollars, 0 to turn it off',
        );
      if ((await billingStore(deps.pool).setLowBalanceThreshold(accountId, micros)) === null)
        throw errors.notFound(`Account ${accountId}`);
    },

    /** The balance and its latest movements, read from one snapshot so that they agree. */
    getBalance: async (accountId: string) => {
      const { balance, entries } = await inTransaction(deps.pool, async (tx) => {
        await tx.query(sql.unsafe`set transaction isolation level repeatable read read only`);
        const store = billingStore(tx);
        return {
          balance: await store.readBalance(accountId),
          entries: await store.latestEntries(accountId, LEDGER_WINDOW),
        };
      });
      if (balance === null) throw errors.notFound(`Account ${accountId}`);
      const owed = Math.max(0, -balance);
      return {
        account_id: accountId,
        currency: 'usd' as const,
        balance_usd: usdNumber(balance),
        balance_micros: balance,
        owed_usd: usdNumber(owed),
        owed_micros: owed,
        ledger: entries.map(presentEntry),
      };
    },

    /**
     * The usage of orgs (their ids) per day, product and metric from `fromDay` to `toDay`: each org's
     * lines with the billed cost and the list price, and its totals. The lines are the account's own
     * (the ledger's), so the orgs' usage adds up to the account's for the same days.
     */
    orgUsage: async (
      accountId: string,
      mode: KeyMode,
      orgIds: readonly string[],
      fromDay: string,
      toDay: string,
    ) => {
      const [table, rows] = await Promise.all([
        deps.prices.table(),
        billingStore(deps.pool).orgUsageByDay(accountId, mode, orgIds, fromDay, toDay),
      ]);
      const byOrg = new Map(
        orgIds.map((id) => [id, { lines: [] as ReturnType<typeof presentOrgLine>[], cost: 0, list: 0 }]),
      );
      const presentOrgLine = (row: (typeof rows)[number]) => ({
        ...presentUsage(table, row),
        list_price_usd: usdNumber(row.list_micros),
        list_price_micros: row.list_micros,
      });
      for (const row of rows) {
        const org = byOrg.get(row.org_id)!;
        org.lines.push(presentOrgLine(row));
        org.cost += row.cost_micros;
        org.list += row.list_micros;
      }
      return new Map(
        [...byOrg].map(([id, org]) => [
          id,
          {
            usage: org.lines,
            total: {
              cost_usd: usdNumber(org.cost),
              cost_micros: org.cost,
              list_price_usd: usdNumber(org.list),
              list_price_micros: org.list,
              charged: mode === 'live',
            },
          },
        ]),
      );
    },

    /** Usage per day, product and metric over the last `days` UTC days (today included), for one key mode. */
    usageReport: async (accountId: string, mode: KeyMode, days: number) => {
      if (!Number.isInteger(days) || days < 1 || days > MAX_USAGE_DAYS)
        throw errors.invalidField('query', 'days', `must be 1-${MAX_USAGE_DAYS}`);
      const now = deps.clock.now();
      const today = utcDay(now);
      const from = utcDay(
        new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (days - 1))),
      );
      const store = billingStore(deps.pool);
      const [table, rows, used] = await Promise.all([
        deps.prices.table(),
        store.usageByDay(accountId, mode, from),
        store.allowanceUsed(accountId, mode, monthOf(today)),
      ]);
      const usedByKey = new Map(used.map((row) => [metricKey(row.product, row.metric), row.used]));
      const totalMicros = rows.reduce((sum, row) => sum + row.cost_micros, 0);
      return {
        account_id: accountId,
        mode,
        from,
        to: today,
        usage: rows.map((row) => presentUsage(table, row)),
        total: { cost_usd: usdNumber(totalMicros), cost_micros: totalMicros, charged: mode === 'live' },
        prices: presentPriceTable(table),
        allowances: [...table.values()]
          .filter((price) => price.allowance > 0)
          .map((price) => {
            const usedQuantity = usedByKey.get(metricKey(price.product, price.metric)) ?? 0;
            return {
              product: price.product,
              metric: price.metric,
              unit: price.unit,
              month: monthOf(today).slice(0, 7),
              included: inUnits(price.allowance, price.unitSize),
              used: inUnits(usedQuantity, price.unitSize),
              remaining: inUnits(Math.max(0, price.allowance - usedQuantity), price.unitSize),
            };
          }),
      };
    },
  };
}

export type BillingService = ReturnType<typeof createBillingService>;
