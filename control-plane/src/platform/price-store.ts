import { sql } from 'slonik';
import { OverrideRow } from './price-catalogue.js';
import type { Db } from './transaction.js';

/** SQL of the operator's price and allowance overrides. */
export function priceStore(db: Db) {
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

    // One statement, so both go or neither does.
    clearOverrides: (product: string, metric: string) =>
      db.query(sql.unsafe`
        with prices as (delete from price_overrides where product = ${product} and metric = ${metric})
        delete from allowance_overrides where product = ${product} and metric = ${metric}`),
  };
}
