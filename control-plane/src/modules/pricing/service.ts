import { formatUsd } from '../../platform/money.js';
import { METRICS, metricKey, REALTIME_PRODUCTS } from '../../platform/price-catalogue.js';
import { inUnits, type PriceTable } from '../../platform/prices.js';

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
      'User tokens (POST /v1/users/{user_id}/tokens) are free to mint and revoke; the calls a user makes with one are priced like the app’s own.',
    ],
  };
}
