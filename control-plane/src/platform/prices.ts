import type { DatabasePool } from 'slonik';
import type { InvalidationBus } from './cache.js';
import { createSharedCache } from './cache.js';
import type { Clock } from './clock.js';
import { ServiceError } from './errors.js';
import { parseUsd } from './money.js';
import {
  METRICS,
  METRICS_BY_KEY,
  type MetricDefinition,
  metricKey,
  type Price,
  priceStepRefusal,
} from './price-catalogue.js';
import { priceStore } from './price-store.js';
import type { Db } from './transaction.js';

export type PriceTable = ReadonlyMap<string, Price>;

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
      const step = setting === 'SVC_PRICES' && definition ? priceStepRefusal(definition, parsed) : null;
      if (!definition) problems.push(`${setting}: unknown metric "${key}"`);
      else if (!Number.isSafeInteger(parsed)) problems.push(`${setting}: "${key}" needs a number, 0 or more`);
      else if (step) problems.push(`${setting}: "${key}" needs ${step}`);
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

/** A metric of the catalogue; an unknown one is a caller's mistake (an operator's, or a route's). */
export function requireMetric(product: string, metric: string): MetricDefinition {
  const definition = METRICS_BY_KEY.get(metricKey(product, metric));
  if (!definition) throw new ServiceError('invalid_request', `unknown metric ${product}.${metric}`);
  return definition;
}

/** A quantity in base units shown in priced units (e.g. seconds as minutes), exact to 6 places. */
export const inUnits = (quantity: number, unitSize: number) => Math.round((quantity / unitSize) * 1e6) / 1e6;

/** The price table is read by every priced call; a change applies everywhere within the bus's delay. */
const PRICE_TABLE_TTL_MS = 30_000;

/**
 * The live price table: shipped defaults, then configuration, then the database (the operator's
 * last word), kept in process and invalidated on every replica when the operator changes it.
 */
export function createPrices(deps: {
  pool: DatabasePool;
  clock: Clock;
  configured: ConfiguredPricing;
  bus: InvalidationBus;
}) {
  const cache = createSharedCache<PriceTable>({
    name: 'prices',
    ttlMs: PRICE_TABLE_TTL_MS,
    maxEntries: 1,
    bus: deps.bus,
  });

  async function load(db: Db): Promise<PriceTable> {
    const store = priceStore(db);
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
    /** The table; on a miss it is read through `db` (a transaction may read only through itself). */
    table: (db: Db = deps.pool) => cache.get('table', () => load(db)),

    setPrice: async (product: string, metric: string, priceMicros: number) => {
      const definition = requireMetric(product, metric);
      if (!Number.isSafeInteger(priceMicros) || priceMicros < 0)
        throw new ServiceError('invalid_request', 'a price is a whole number of micro-dollars, 0 or more');
      const step = priceStepRefusal(definition, priceMicros);
      if (step) throw new ServiceError('invalid_request', `the price of ${product}.${metric} is ${step}`);
      await priceStore(deps.pool).setPrice(product, metric, priceMicros, deps.clock.now());
      await cache.clear();
    },

    /** Sets a free monthly allowance, given in priced units (minutes, GB, calls…). */
    setAllowance: async (product: string, metric: string, units: number) => {
      const definition = requireMetric(product, metric);
      const quantity = Math.round(units * definition.unitSize);
      if (!Number.isSafeInteger(quantity) || quantity < 0)
        throw new ServiceError('invalid_request', 'an allowance is 0 or more units');
      await priceStore(deps.pool).setAllowance(product, metric, quantity, deps.clock.now());
      await cache.clear();
    },

    resetToConfigured: async (product: string, metric: string) => {
      requireMetric(product, metric);
      await priceStore(deps.pool).clearOverrides(product, metric);
      await cache.clear();
    },
  };
}

export type Prices = ReturnType<typeof createPrices>;
