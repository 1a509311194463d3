import { Type } from '@sinclair/typebox';

const Entry = Type.Object(
  {
    product: Type.String(),
    metric: Type.String(),
    unit: Type.String({ description: 'What the price is per' }),
    price_usd: Type.Number({ description: 'USD per unit' }),
    price_micros: Type.Integer({ description: 'Micro-dollars per unit' }),
    free_monthly_allowance: Type.Number({ description: 'Units free each calendar month (UTC), per account' }),
    description: Type.String(),
  },
  { additionalProperties: false },
);

export const PriceTableResponse = Type.Object(
  {
    currency: Type.Literal('usd'),
    prices: Type.Array(Entry, { description: 'Every priced metric of every product' }),
    realtime: Type.Object(
      {
        chat: Type.Array(Entry),
        live: Type.Array(Entry),
        calls: Type.Array(Entry),
      },
      {
        description: 'The realtime products: chat per monthly active user, live and call minutes by quality',
      },
    ),
    free_monthly_allowances: Type.Array(
      Type.Object(
        { product: Type.String(), metric: Type.String(), unit: Type.String(), quantity: Type.Number() },
        { additionalProperties: false },
      ),
    ),
    notes: Type.Array(Type.String()),
  },
  { additionalProperties: false },
);
