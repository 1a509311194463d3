import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import { PriceTableResponse } from '../pricing/schema.js';

export const LedgerEntryRow = z.object({
  id: z.string(),
  account_id: z.string(),
  kind: z.enum(['topup', 'usage']),
  amount_micros: z.number().int(),
  reference: z.string().nullable(),
  balance_after_micros: z.number().int(),
  app_id: z.string().nullable(),
  day: z.string().nullable(),
  created_at: z.date(),
  updated_at: z.date(),
});
export type LedgerEntryRow = z.infer<typeof LedgerEntryRow>;

/** How many ledger movements the balance endpoint shows (spec: the last 50). */
export const LEDGER_WINDOW = 50;

export const Usd = (description: string) =>
  Type.Number({ description: `${description}, in USD (6 decimal places)` });
export const Micros = (description: string) =>
  Type.Integer({ description: `${description}, in integer micro-dollars` });

export const LedgerEntry = Type.Object(
  {
    id: Type.String(),
    kind: Type.Union([Type.Literal('topup'), Type.Literal('usage')], {
      description:
        'topup: money added; usage: one line per app per UTC day holding that day’s charges so far',
    }),
    amount_usd: Usd('Signed amount: positive for top-ups, negative (or 0) for usage'),
    amount_micros: Micros('The same amount'),
    balance_after_usd: Usd('Balance right after this movement (for a usage line: after its latest charge)'),
    reference: Type.Union([Type.String(), Type.Null()], {
      description: 'A top-up’s reference; null on usage lines',
    }),
    app_id: Type.Union([Type.String(), Type.Null()], {
      description: 'The app of a usage line; null on top-ups',
    }),
    day: Type.Union([Type.String({ format: 'date' }), Type.Null()], {
      description: 'The UTC day of a usage line',
    }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({
      format: 'date-time',
      description: 'Latest change; the ledger is ordered by it',
    }),
  },
  { additionalProperties: false },
);

export const BalanceResponse = Type.Object(
  {
    account_id: Type.String(),
    currency: Type.Literal('usd'),
    balance_usd: Usd('Prepaid balance; below zero when usage metered afterwards was more than it held'),
    balance_micros: Micros('Prepaid balance'),
    owed_usd: Usd('What is owed (0 unless the balance is below zero): the next top-up repays it first'),
    owed_micros: Micros('What is owed'),
    ledger: Type.Array(LedgerEntry, { description: `The last ${LEDGER_WINDOW} movements, newest first` }),
  },
  { additionalProperties: false },
);

/** The usage report's window: 1 to 90 UTC days, today included. */
export const MAX_USAGE_DAYS = 90;
export const DEFAULT_USAGE_DAYS = 30;

export const UsageQuery = Type.Object(
  {
    days: Type.Integer({
      minimum: 1,
      maximum: MAX_USAGE_DAYS,
      default: DEFAULT_USAGE_DAYS,
      description: `UTC days to report, today included (1-${MAX_USAGE_DAYS})`,
    }),
  },
  { additionalProperties: false },
);

/** A usage report's line: one UTC day, product and metric. */
export const UsageLine = Type.Object(
  {
    day: Type.String({ format: 'date' }),
    product: Type.String(),
    metric: Type.String(),
    unit: Type.String(),
    quantity: Type.Number({ description: 'In the priced unit (calls, minutes, GB…)' }),
    billable_quantity: Type.Number({ description: 'What was left after the free monthly allowance' }),
    cost_usd: Usd('Cost'),
    cost_micros: Micros('Cost'),
  },
  { additionalProperties: false },
);

/** A usage report's total over its window. */
export const UsageTotal = Type.Object(
  {
    cost_usd: Usd('Total cost of the window'),
    cost_micros: Micros('The same total'),
    charged: Type.Boolean({
      description: 'Whether this mode pays from the balance (live) or not (test)',
    }),
  },
  { additionalProperties: false },
);

export const UsageResponse = Type.Object(
  {
    account_id: Type.String(),
    mode: Type.Union([Type.Literal('live'), Type.Literal('test')], { description: 'The calling key’s mode' }),
    from: Type.String({ format: 'date' }),
    to: Type.String({ format: 'date' }),
    usage: Type.Array(UsageLine, { description: 'Per UTC day, product and metric, newest day first' }),
    total: UsageTotal,
    prices: PriceTableResponse,
    allowances: Type.Array(
      Type.Object(
        {
          product: Type.String(),
          metric: Type.String(),
          unit: Type.String(),
          month: Type.String({ description: 'YYYY-MM, UTC' }),
          included: Type.Number(),
          used: Type.Number(),
          remaining: Type.Number(),
        },
        { additionalProperties: false },
      ),
      { description: 'The free monthly allowances of this month, for this key mode' },
    ),
  },
  { additionalProperties: false },
);
