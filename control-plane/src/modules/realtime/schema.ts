import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import { literalUnion } from '../../platform/schemas.js';

export const PRODUCTS = ['chat', 'live', 'calls'] as const;
export type Product = (typeof PRODUCTS)[number];

export const MIN_ROOM_SIZE = 2;
export const MAX_ROOM_SIZE = 100_000;

/** The settings a new app starts with. */
export const DEFAULT_SETTINGS = { mam: false, products: [...PRODUCTS] as Product[], maxRoomSize: 100 };

export const RealtimeAppRow = z.object({
  app_id: z.string(),
  account_id: z.string(),
  mode: z.enum(['live', 'test']),
  chat_prefix: z.string(),
  publishable_token: z.string(),
  shield_secret: z.string(),
  mam: z.boolean(),
  products: z.array(z.enum(PRODUCTS)),
  max_room_size: z.number().int(),
  version: z.number().int(),
});
export type RealtimeAppRow = z.infer<typeof RealtimeAppRow>;

const ProductList = Type.Array(literalUnion(PRODUCTS), {
  uniqueItems: true,
  maxItems: PRODUCTS.length,
  description: 'The realtime products switched on for the app',
});

export const AppSettingsResponse = Type.Object(
  {
    app_id: Type.String(),
    publishable_key: Type.String({
      description: 'pk_live_… or pk_test_… (the caller’s mode): safe in clients',
    }),
    mam: Type.Boolean({ description: 'Whether chat messages are archived (XEP-0313)' }),
    products: ProductList,
    max_room_size: Type.Integer({ description: 'Participant limit of every chat room and live room' }),
    chat_host: Type.String({ description: 'The XMPP domain of the app’s users' }),
    shield_secret: Type.String({ description: 'Server-only: verifies shield tickets' }),
  },
  { additionalProperties: false },
);

export const AppSettingsPatch = Type.Object(
  {
    mam: Type.Optional(Type.Boolean()),
    products: Type.Optional(ProductList),
    max_room_size: Type.Optional(Type.Integer({ minimum: MIN_ROOM_SIZE, maximum: MAX_ROOM_SIZE })),
  },
  {
    additionalProperties: false,
    description: 'Every field is optional: an empty change answers the settings',
  },
);
