import type { CommonQueryMethods, DatabasePool } from 'slonik';
import type { Clock } from '../../lib/clock.js';
import { formatUsd, parseUsd } from '../../lib/money.js';
import { METRICS, METRICS_BY_KEY, metricKey, type Price, REALTIME_PRODUCTS } from './schema.js';
import { pricingStore } from './store.js';

export class PricingError extends Error {
  override name = 'PricingError';
}

/** Operator settings from configuration: prices in micro-dollars, allowances in base units, by metric key. */
export interface ConfiguredPricing {
  prices: ReadonlyMap<string, number>;
  allowances: ReadonlyMap<string, number>;
}

export const NO_CONFIGURED_PRICING: ConfiguredPricing = { prices: new Map(), allowances: new Map() };

/**
 * Reads SVC_PRICES (USD per unit) and SVC_FREE_ALLOWANCES (priced units): comma- or space-separated
 * `product.metric=value` pairs. Returns the problems instead of throwing, so that the settings
 * loader can report them with every other bad setting.
 */
export function parseConfiguredPricing(prices: string, allowances: string) {
  const problems: string[] = [];
  const read = (setting: string, text: string, toBase: (value: string, unitSize: number) => number) => {
    const values = new Map<string, number>();
    for (const pair of text.split(/[\s,]+/).filter(Boolean)) {
      const [key = '', value = ''] = pair.split('=');
      const definition = METRICS_BY_KEY.get(key);
      const parsed =
        definition && /^\d+(\.\d+)?$/.test(value) ? toBase(value, definition.unitSize) : Number.NaN;
      if (!definition) problems.push(`${setting}: unknown metric "${key}"`);
      else if (!Number.isSafeInteger(parsed)) problems.push(`${setting}: "${key}" needs a number, 0 or more`);
      else values.set(key, parsed);
    }
    return values;
  };
  const configured: ConfiguredPricing = {
    prices: read('SVC_PRICES', prices, (value) => {
      try {
        return parseUsd(value);
      } catch {
        return Number.NaN;
      }
    }),
    allowances: read('SVC_FREE_ALLOWANCES', allowances, (value, unitSize) =>
      Math.round(Number(value) * unitSize),
    ),
  };
  return { configured, problems };
}

export function requireMetric(product: string, metric: string) {
  const definition = METRICS_BY_KEY.get(metricKey(product, metric));
  if (!definition) throw new PricingError(`unknown metric ${product}.${metric}`);
  return definition;
}

/** A quantity in base units shown in priced units (e.g. seconds as minutes), exact to 6 places. */
export const inUnits = (quantity: number, unitSize: number) => Math.round((quantity / unitSize) * 1e6) / 1e6;

export type PriceTable = ReadonlyMap<string, Price>;

/**
 * The live price table: shipped defaults, then configuration, then the database (the operator's
 * last word). Read from the database on every priced call, so a change applies to the next call.
 */
export function createPricingService(deps: {
  pool: DatabasePool;
  clock: Clock;
  configured: ConfiguredPricing;
}) {
  async function priceTable(db: CommonQueryMethods = deps.pool): Promise<PriceTable> {
    const store = pricingStore(db);
    const [prices, allowances] = await Promise.all([store.priceOverrides(), store.allowanceOverrides()]);
    const priceOverride = new Map(prices.map((row) => [metricKey(row.product, row.metric), row.value]));
    const allowanceOverride = new Map(
      allowances.map((row) => [metricKey(row.product, row.metric), row.value]),
    );
    return new Map(
      METRICS.map((definition) => {
        const key = metricKey(definition.product, definition.metric);
        const price: Price = {
          product: definition.product,
          metric: definition.metric,
          unit: definition.unit,
          unitSize: definition.unitSize,
          priceMicros:
            priceOverride.get(key) ?? deps.configured.prices.get(key) ?? definition.defaultPriceMicros,
          allowance:
            allowanceOverride.get(key) ?? deps.configured.allowances.get(key) ?? definition.defaultAllowance,
        };
        return [key, price];
      }),
    );
  }

  return {
    priceTable,

    setPrice: async (product: string, metric: string, priceMicros: number) => {
      requireMetric(product, metric);
      if (!Number.isSafeInteger(priceMicros) || priceMicros < 0)
        throw new PricingError('a price is a whole number of micro-dollars, 0 or more');
      await pricingStore(deps.pool).setPrice(product, metric, priceMicros, deps.clock.now());
    },

    /** Sets a free monthly allowance, given in priced units (minutes, GB, calls…). */
    setAllowance: async (product: string, metric: string, units: number) => {
      const definition = requireMetric(product, metric);
      const quantity = Math.round(units * definition.unitSize);
      if (!Number.isSafeInteger(quantity) || quantity < 0)
        throw new PricingError('an allowance is 0 or more units');
      await pricingStore(deps.pool).setAllowance(product, metric, quantity, deps.clock.now());
    },

    resetToConfigured: async (product: string, metric: string) => {
      requireMetric(product, metric);
      await pricingStore(deps.pool).clearOverrides(product, metric);
    },
  };
}

export type PricingService = ReturnType<typeof createPricingService>;

/** The public shape of the price table (GET /v1/pricing, and inside the usage report). */
export function presentPriceTable(table: PriceTable) {
  const entries = METRICS.map((definition) => {
    const price = table.get(metricKey(definition.product, definition.metric))!;
    return {
      product: price.product,
      metric: price.metric,
      unit: price.unit,
      price_usd: Number(formatUsd(price.priceMicros)),
      price_micros: price.priceMicros,
      free_monthly_allowance: inUnits(price.allowance, price.unitSize),
      description: definition.description,
    };
  });
  const ofProduct = (product: string) => entries.filter((entry) => entry.product === product);
  return {
    currency: 'usd' as const,
    prices: entries,
    realtime: Object.fromEntries(REALTIME_PRODUCTS.map((product) => [product, ofProduct(product)])) as Record<
      (typeof REALTIME_PRODUCTS)[number],
      typeof entries
    >,
    free_monthly_allowances: entries
      .filter((entry) => entry.free_monthly_allowance > 0)
      .map((entry) => ({
        product: entry.product,
        metric: entry.metric,
        unit: entry.unit,
        quantity: entry.free_monthly_allowance,
      })),
    notes: [
      'Live keys pay from the prepaid balance only for calls that succeed; test keys are priced but never charged.',
      'Free allowances renew on the first day of each calendar month (UTC), per account and key mode.',
      'Reads are free; their response bytes count as bandwidth. Storage delivery has no bandwidth charge.',
      'Video minutes are priced at the higher of the declared and the published quality.',
    ],
  };
}
