import { type DatabasePool, sql } from 'slonik';
import { z } from 'zod';
import type { Payer } from './caller.js';
import { type Clock, utcDay } from './clock.js';
import { PaymentRequiredError, ServiceError } from './errors.js';
import { newId } from './ids.js';
import { metricKey, type Price } from './price-catalogue.js';
import { type Prices, type PriceTable, requireMetric } from './prices.js';
import type { Standing } from './standing.js';
import { inTransaction, type Transaction } from './transaction.js';

/** One metered quantity, in the metric's base unit (calls, seconds, bytes, byte-days, users). */
export interface Usage {
  product: string;
  metric: string;
  quantity: number;
  /** The price it was used at, for usage accrued earlier; otherwise the table's price now. */
  price?: UsagePrice;
}

export type UsagePrice = Pick<Price, 'priceMicros' | 'unitSize' | 'allowance'>;

/** The SQLSTATE svc_meter raises when a balance cannot pay a priced call. */
const CANNOT_PAY = 'SV402';

const MeterResult = z.object({
  charged_micros: z.number().int(),
  balance_micros_after: z.number().int().nullable(),
  version_after: z.number().int().nullable(),
  crossed_zero: z.boolean(),
});

const PositionRow = z.object({
  account_id: z.string(),
  balance_micros: z.number().int(),
  product: z.string().nullable(),
  metric: z.string().nullable(),
  used: z.number().int().nullable(),
});

const cannotPay = (error: unknown) => (error as { code?: unknown } | null)?.code === CANNOT_PAY;

export const insufficientBalance = () =>
  new PaymentRequiredError('Your prepaid balance cannot pay for this call; top up to continue');

/**
 * Prices usages, sums the quantities of each metric at each price and sorts them: every charge locks
 * the rows of its usages in one order.
 */
export function normaliseUsages(usages: readonly Usage[], table: PriceTable): Required<Usage>[] {
  const merged = new Map<string, Required<Usage>>();
  for (const usage of usages) {
    if (!Number.isSafeInteger(usage.quantity) || usage.quantity < 0) {
      throw new ServiceError('api_error', 'usage is a whole number, 0 or more', {
        detail: `${usage.product}.${usage.metric} quantity ${usage.quantity}`,
      });
    }
    requireMetric(usage.product, usage.metric);
    const price = usage.price ?? table.get(metricKey(usage.product, usage.metric))!;
    const key = [metricKey(usage.product, usage.metric), price.priceMicros, price.unitSize].join(' ');
    const seen = merged.get(key);
    merged.set(key, { ...usage, price, quantity: (seen?.quantity ?? 0) + usage.quantity });
  }
  return [...merged.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, usage]) => usage)
    .filter((usage) => usage.quantity > 0);
}

/**
 * The one way usage is metered and charged. Every charge is one call of the SQL function svc_meter in
 * the caller's transaction: it takes the account's row lock first (live keys), then the allowance and
 * usage rows in metric order, then the app's usage line of the day. Test keys are metered and priced
 * the same way and never charged.
 */
export function createMetering(deps: {
  pool: DatabasePool;
  clock: Clock;
  prices: Prices;
  standing: Standing;
  onError?: (error: unknown) => void;
}) {
  async function meterIn(
    tx: Transaction,
    payer: Payer,
    usages: readonly Usage[],
    conditional: boolean,
    day?: string,
  ): Promise<number> {
    const metered = normaliseUsages(usages, await deps.prices.table(tx));
    if (metered.length === 0 && !(conditional && payer.mode === 'live')) return 0;
    const prices = metered.map((usage) => usage.price);
    const at = deps.clock.now();
    const result = await tx.one(sql.type(MeterResult)`
      select charged_micros, balance_micros_after, version_after, crossed_zero from svc_meter(
        ${payer.accountId}, ${payer.appId}, ${payer.mode}, ${day ?? utcDay(at)}, ${sql.timestamp(at)}, ${newId('led')},
        ${sql.array(
          metered.map((usage) => usage.product),
          'text',
        )}, ${sql.array(
          metered.map((usage) => usage.metric),
          'text',
        )},
        ${sql.array(
          metered.map((usage) => usage.quantity),
          'int8',
        )}, ${sql.array(
          prices.map((price) => price.priceMicros),
          'int8',
        )},
        ${sql.array(
          prices.map((price) => price.unitSize),
          'int8',
        )}, ${sql.array(
          prices.map((price) => price.allowance),
          'int8',
        )},
        ${conditional})`);
    if (result.crossed_zero && result.balance_micros_after !== null && result.version_after !== null) {
      const { balance_micros_after: balance, version_after: version } = result;
      tx.afterCommit(() => deps.standing.record(payer.accountId, balance, version));
    }
    return result.charged_micros;
  }

  return {
    /**
     * A priced call: its work and its charge commit together, or neither does. A live balance at zero
     * or below, or one that does not cover the cost, refuses the call (402) and rolls the work back;
     * a failed call is not charged. Returns what the work returned and what the call cost.
     */
    charge: async <T>(
      payer: Payer,
      usages: readonly Usage[],
      work: (tx: Transaction) => Promise<T>,
    ): Promise<{ result: T; costMicros: number }> => {
      try {
        return await inTransaction(
          deps.pool,
          async (tx) => {
            const result = await work(tx);
            return { result, costMicros: await meterIn(tx, payer, usages, true) };
          },
          deps.onError,
        );
      } catch (error) {
        if (cannotPay(error)) throw insufficientBalance();
        throw error;
      }
    },

    /**
     * Usage known only after the fact (minutes, bandwidth, stored bytes, monthly active users), metered
     * in the caller's transaction and charged in full: a live balance may go below zero, and what is
     * owed is repaid by the next top-up. Nothing is forgiven. `day` (YYYY-MM-DD, default today) is
     * the UTC day the usage happened, for usage accrued earlier.
     */
    meter: (tx: Transaction, payer: Payer, usages: readonly Usage[], day?: string) =>
      meterIn(tx, payer, usages, false, day),

    /** Live accounts' balances and the free allowances they used this month (metric key → base units). */
    positions: async (accountIds: readonly string[], at: Date) => {
      const rows = await deps.pool.any(sql.type(PositionRow)`
        select a.id as account_id, a.balance_micros, u.product, u.metric, u.used
        from accounts a
        left join allowance_usage u
          on u.account_id = a.id and u.mode = 'live' and u.month = ${`${utcDay(at).slice(0, 7)}-01`}
        where a.id = any(${sql.array(accountIds, 'text')})`);
      const positions = new Map<string, { balance: number; allowanceUsed: Map<string, number> }>();
      for (const row of rows) {
        const position = positions.get(row.account_id) ?? {
          balance: row.balance_micros,
          allowanceUsed: new Map(),
        };
        if (row.product && row.metric)
          position.allowanceUsed.set(metricKey(row.product, row.metric), row.used ?? 0);
        positions.set(row.account_id, position);
      }
      return positions;
    },
  };
}

export type Metering = ReturnType<typeof createMetering>;
