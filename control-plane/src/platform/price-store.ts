import { type CommonQueryMethods, sql } from 'slonik';
import { OverrideRow } from './price-catalogue.js';

/** SQL of the operator's price and allowance overrides. */
export function priceStore(db: CommonQueryMethods) {
  return {
    priceOverrides: () =>
      db.any(sql.type(OverrideRow)`select product, metric, price_micros as value from price_overrides`),

    allowanceOverrides: () =>
      db.any(sql.type(OverrideRow)`select product, metric, quantity as value from allowance_overrides`),

    setPrice: (product: string, metric: string, priceMicros: number, at: Date) =>
      db.query(sql.unsafe`
        insert into price_overrides (product, metric, price_micros, updated_at)
        values (${product}, ${metric}, ${priceMicros}, ${sql.timestamp(at)})
        on conflict (product, metric) do update set price_micros = excluded.price_micros, updated_at = excluded.updated_at`),

    setAllowance: (product: string, metric: string, quantity: number, at: Date) =>
      db.query(sql.unsafe`
        insert into allowance_overrides (product, metric, quantity, updated_at)
        values (${product}, ${metric}, ${quantity}, ${sql.timestamp(at)})
        on conflict (product, metric) do update set quantity = excluded.quantity, updated_at = excluded.updated_at`),

    clearOverrides: (product: string, metric: string) =>
      db.transaction(async (tx) => {
        await tx.query(
          sql.unsafe`delete from price_overrides where product = ${product} and metric = ${metric}`,
        );
        await tx.query(
          sql.unsafe`delete from allowance_overrides where product = ${product} and metric = ${metric}`,
        );
      }),
  };
}
