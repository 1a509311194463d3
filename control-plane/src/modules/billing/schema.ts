import { Type } from '@sinclair/typebox';
import { z } from 'zod';

export const LedgerEntryRow = z.object({
  id: z.string(),
  account_id: z.string(),
  kind: z.enum(['topup']),
  amount_micros: z.number().int(),
  reference: z.string(),
  balance_after_micros: z.number().int(),
  created_at: z.date(),
});
export type LedgerEntryRow = z.infer<typeof LedgerEntryRow>;

/** How many ledger movements the balance endpoint shows (spec: the last 50). */
export const LEDGER_WINDOW = 50;

const Usd = (description: string) =>
  Type.Number({ description: `${description}, in USD (6 decimal places)` });
const Micros = (description: string) =>
  Type.Integer({ description: `${description}, in integer micro-dollars` });

export const LedgerEntry = Type.Object(
  {
    id: Type.String(),
    kind: Type.Union([Type.Literal('topup'), Type.Literal('usage')], {
      description: 'topup: money added; usage: one line per app per day holding that day’s charges so far',
    }),
    amount_usd: Usd('Signed amount: positive for top-ups, negative for usage'),
    amount_micros: Micros('The same amount'),
    balance_after_usd: Usd('Balance right after this movement'),
    reference: Type.String({ description: 'The top-up reference given by whoever added the money' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const BalanceResponse = Type.Object(
  {
    account_id: Type.String(),
    currency: Type.Literal('usd'),
    balance_usd: Usd('Prepaid balance'),
    balance_micros: Micros('Prepaid balance'),
    ledger: Type.Array(LedgerEntry, { description: `The last ${LEDGER_WINDOW} movements, newest first` }),
  },
  { additionalProperties: false },
);
