import { type CommonQueryMethods, type DatabasePool, sql } from 'slonik';
import type { Clock } from '../../lib/clock.js';
import { utcDay } from '../../lib/clock.js';
import { formatUsd } from '../../lib/money.js';
import { newId } from '../../lib/random.js';
import type { KeyMode } from '../accounts/schema.js';
import { metricKey, type Price } from '../pricing/schema.js';
import {
  inUnits,
  type PriceTable,
  type PricingService,
  presentPriceTable,
  requireMetric,
} from '../pricing/service.js';
import { LEDGER_WINDOW, type LedgerEntryRow, MAX_USAGE_DAYS } from './schema.js';
import { billingStore } from './store.js';

export class BillingError extends Error {
  override name = 'BillingError';
}

/** A live charge the balance cannot pay: the route answers 402 PAYMENT_REQUIRED. */
export class InsufficientBalanceError extends Error {
  override name = 'InsufficientBalanceError';
  constructor(
    readonly neededMicros: number,
    readonly balanceMicros: number | null,
    message = `Your prepaid balance cannot pay for this call (it costs ${formatUsd(neededMicros)} USD); top up to continue`,
  ) {
    super(message);
  }
}

/** USD as a JSON number: exact to the micro-dollar because it is parsed from the formatted decimal. */
export const usdNumber = (micros: number) => Number(formatUsd(micros));

/** Who pays: the app of a key, in the key's mode. */
export interface Payer {
  accountId: string;
  appId: string;
  mode: KeyMode;
}

/** One metered quantity, in the metric's base unit (calls, seconds, bytes, byte-days, users). */
export interface Usage {
  product: string;
  metric: string;
  quantity: number;
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

export function createBillingService(deps: { pool: DatabasePool; clock: Clock; pricing: PricingService }) {
  function priceOf(table: PriceTable, usage: Usage): Price {
    requireMetric(usage.product, usage.metric);
    return table.get(metricKey(usage.product, usage.metric))!;
  }

  /**
   * Meters usage inside the caller's transaction and returns its cost. For a live key the cost is
   * taken from the balance in the same transaction: all of it, or (best effort) as much as is left.
   */
  async function meterIn(
    tx: CommonQueryMethods,
    payer: Payer,
    usages: readonly Usage[],
    options: { table: PriceTable; bestEffort: boolean },
  ): Promise<number> {
    const store = billingStore(tx);
    const at = deps.clock.now();
    const day = utcDay(at);
    let cost = 0;
    for (const usage of usages) {
      if (!Number.isSafeInteger(usage.quantity) || usage.quantity < 0) {
        throw new BillingError(`usage quantity must be a whole number, 0 or more: ${usage.quantity}`);
      }
      if (usage.quantity === 0) continue;
      const price = priceOf(options.table, usage);
      const free =
        price.allowance > 0
          ? await store.useAllowance({
              accountId: payer.accountId,
              mode: payer.mode,
              month: monthOf(day),
              product: usage.product,
              metric: usage.metric,
              quantity: usage.quantity,
              allowance: price.allowance,
            })
          : 0;
      cost += await store.addUsage({
        accountId: payer.accountId,
        appId: payer.appId,
        mode: payer.mode,
        day,
        product: usage.product,
        metric: usage.metric,
        priceMicros: price.priceMicros,
        unitSize: price.unitSize,
        quantity: usage.quantity,
        billable: usage.quantity - free,
        at,
      });
    }
    if (payer.mode === 'test' || cost === 0) return cost;

    let charged = cost;
    let balance: number | null;
    if (options.bestEffort) {
      ({ taken: charged, balance_micros: balance } = await store.debitAtMost(payer.accountId, cost));
    } else {
      balance = await store.debit(payer.accountId, cost);
      if (balance === null)
        throw new InsufficientBalanceError(cost, await store.readBalance(payer.accountId));
    }
    if (charged > 0) {
      await store.addToUsageLine({
        id: newId('led'),
        accountId: payer.accountId,
        appId: payer.appId,
        day,
        amountMicros: charged,
        balanceAfter: balance,
        at,
      });
    }
    return cost;
  }

  /** What the usage would cost now, for the check before any work; allowances left are counted. */
  async function quote(payer: Payer, usages: readonly Usage[], table: PriceTable): Promise<number> {
    const month = monthOf(utcDay(deps.clock.now()));
    const used = new Map(
      (await billingStore(deps.pool).allowanceUsed(payer.accountId, payer.mode, month)).map((row) => [
        metricKey(row.product, row.metric),
        row.used,
      ]),
    );
    return usages.reduce((total, usage) => {
      const price = priceOf(table, usage);
      const left = Math.max(0, price.allowance - (used.get(metricKey(usage.product, usage.metric)) ?? 0));
      const billable = Math.max(0, usage.quantity - left);
      return total + Math.ceil((billable * price.priceMicros) / price.unitSize);
    }, 0);
  }

  return {
    /**
     * A priced call: refused before any work when a live balance cannot pay (402), then the work
     * and its charge commit together. A failed call is not charged; test keys are never charged.
     */
    charge: async <T>(
      payer: Payer,
      usages: readonly Usage[],
      work: (tx: CommonQueryMethods) => Promise<T>,
    ): Promise<{ result: T; costMicros: number }> => {
      const table = await deps.pricing.priceTable();
      if (payer.mode === 'live') {
        const needed = await quote(payer, usages, table);
        const balance = await billingStore(deps.pool).readBalance(payer.accountId);
        if (needed > 0 && (balance ?? 0) < needed) throw new InsufficientBalanceError(needed, balance);
      }
      return deps.pool.transaction(async (tx) => {
        const result = await work(tx);
        const costMicros = await meterIn(tx, payer, usages, { table, bestEffort: false });
        return { result, costMicros };
      });
    },

    /** Live credentials are minted only while the balance is not empty (spec: 402 on an empty balance). */
    requireLiveBalance: async (payer: Payer, what: string): Promise<void> => {
      if (payer.mode !== 'live') return;
      const balance = await billingStore(deps.pool).readBalance(payer.accountId);
      if ((balance ?? 0) <= 0) {
        throw new InsufficientBalanceError(
          0,
          balance,
          `The prepaid balance is empty: top up to mint ${what} with a live key`,
        );
      }
    },

    /**
     * Usage known only after the work (a read's bandwidth, a participant's minutes): charged as far
     * as the balance goes. Runs in the caller's transaction when given one.
     */
    meterAfter: async (payer: Payer, usages: readonly Usage[], tx?: CommonQueryMethods): Promise<number> => {
      const meter = async (db: CommonQueryMethods) =>
        meterIn(db, payer, usages, { table: await deps.pricing.priceTable(db), bestEffort: true });
      return tx ? meter(tx) : deps.pool.transaction(meter);
    },

    /**
     * A chat login. The first in a month makes the user a monthly active user, priced past the free
     * allowance; a live app whose balance cannot pay for that refuses the login and counts nothing.
     */
    recordChatLogin: async (
      payer: Payer,
      userId: string,
    ): Promise<{ allowed: boolean; newMonthlyActiveUser: boolean }> => {
      const table = await deps.pricing.priceTable();
      try {
        return await deps.pool.transaction(async (tx) => {
          const added = await billingStore(tx).addMonthlyActiveUser({
            appId: payer.appId,
            mode: payer.mode,
            month: monthOf(utcDay(deps.clock.now())),
            userId,
            at: deps.clock.now(),
          });
          if (added) {
            await meterIn(tx, payer, [{ product: 'chat', metric: 'monthly_active_users', quantity: 1 }], {
              table,
              bestEffort: false,
            });
          }
          return { allowed: true, newMonthlyActiveUser: added };
        });
      } catch (error) {
        if (error instanceof InsufficientBalanceError) return { allowed: false, newMonthlyActiveUser: false };
        throw error;
      }
    },

    /**
     * Adds money to an account. Idempotent on the caller's reference: a replay returns the first
     * entry and adds nothing, even when both run at once (the row lock serialises them).
     */
    topUp: async (input: { accountId: string; amountMicros: number; reference: string }) => {
      if (!Number.isSafeInteger(input.amountMicros) || input.amountMicros <= 0) {
        throw new BillingError('a top-up must be a positive whole number of micro-dollars');
      }
      if (input.reference.trim() === '') throw new BillingError('a top-up needs a reference');
      return deps.pool.transaction(async (tx) => {
        const store = billingStore(tx);
        if ((await store.lockBalance(input.accountId)) === null)
          throw new BillingError(`no account ${input.accountId}`);
        const earlier = await store.findTopUp(input.accountId, input.reference);
        if (earlier) {
          if (earlier.amount_micros !== input.amountMicros) {
            throw new BillingError(`reference ${input.reference} was already used for a different amount`);
          }
          return { entry: earlier, replayed: true };
        }
        const balance = await store.addToBalance(input.accountId, input.amountMicros);
        const entry = await store.insertTopUp({
          id: newId('led'),
          accountId: input.accountId,
          amountMicros: input.amountMicros,
          reference: input.reference,
          balanceAfter: balance,
          at: deps.clock.now(),
        });
        return { entry, replayed: false };
      });
    },

    /** The balance and its latest movements, read from one snapshot so that they agree. */
    getBalance: async (accountId: string) => {
      const { balance, entries } = await deps.pool.transaction(async (tx) => {
        await tx.query(sql.unsafe`set transaction isolation level repeatable read read only`);
        const store = billingStore(tx);
        return {
          balance: await store.readBalance(accountId),
          entries: await store.latestEntries(accountId, LEDGER_WINDOW),
        };
      });
      if (balance === null) throw new BillingError(`no account ${accountId}`);
      return {
        account_id: accountId,
        currency: 'usd' as const,
        balance_usd: usdNumber(balance),
        balance_micros: balance,
        ledger: entries.map(presentEntry),
      };
    },

    /** Usage per day, product and metric over the last `days` UTC days (today included), for one key mode. */
    usageReport: async (accountId: string, mode: KeyMode, days: number) => {
      if (!Number.isInteger(days) || days < 1 || days > MAX_USAGE_DAYS)
        throw new BillingError(`days must be 1-${MAX_USAGE_DAYS}`);
      const now = deps.clock.now();
      const today = utcDay(now);
      const from = utcDay(
        new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (days - 1))),
      );
      const store = billingStore(deps.pool);
      const [table, rows, used] = await Promise.all([
        deps.pricing.priceTable(),
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
        usage: rows.map((row) => {
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
        }),
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
