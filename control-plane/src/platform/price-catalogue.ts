import { z } from 'zod';

/**
 * Every priced metric of every product. Quantities are metered in a base unit (calls, seconds,
 * bytes, byte-days, users) and priced per `unitSize` base units, e.g. bandwidth per 10^9 bytes.
 */
export interface MetricDefinition {
  product: string;
  metric: string;
  /** What the price is per, as shown in the price table. */
  unit: string;
  /** Base units in one priced unit. */
  unitSize: number;
  /** Shipped price per unit, in micro-dollars. */
  defaultPriceMicros: number;
  /** Shipped free monthly allowance, in base units (0: none). */
  defaultAllowance: number;
  /** Prices are whole multiples of this many micro-dollars (a cost answered in coarser units). */
  priceStepMicros?: number;
  description: string;
}

/** Whether a price fits its metric's step; the step's name when it does not. */
export const priceStepRefusal = (definition: MetricDefinition, priceMicros: number) =>
  definition.priceStepMicros && priceMicros % definition.priceStepMicros !== 0
    ? `a whole number of ${definition.priceStepMicros} micro-dollars (its cost is answered in those units)`
    : null;

const GB = 1_000_000_000;
const MINUTE = 60;

const minutes = (
  product: 'live' | 'calls',
  what: string,
  prices: Record<'hd' | 'fhd' | '4k' | 'audio', number>,
) =>
  (['hd', 'fhd', '4k', 'audio'] as const).map(
    (quality): MetricDefinition => ({
      product,
      metric: `${quality}_minutes`,
      unit: 'participant-minute',
      unitSize: MINUTE,
      defaultPriceMicros: prices[quality],
      // The free minutes are shared out as 1,000 per quality (audio counts separately).
      defaultAllowance: 1_000 * MINUTE,
      description:
        quality === 'audio'
          ? `${what}: minutes of audio-only participants`
          : `${what}: participant minutes at ${quality === '4k' ? '4K' : quality === 'fhd' ? '1080p' : '720p'}`,
    }),
  );

/** The price every write to public data declares: one call of `writes.calls`. */
export const PUBLIC_DATA_WRITE = { product: 'writes', metric: 'calls' } as const;

/**
 * How org, circle and business writes are priced: most change the chat server's rooms, bookmarks or
 * affiliations before they commit, which a rollback would not undo there. So once admitted (a live
 * balance above zero) they are charged in full, like an OTP sent, rather than refused at the commit
 * with their rooms already changed. One rule for all of them, the few that touch no room included.
 */
export const ROOM_WRITE = { price: PUBLIC_DATA_WRITE, irreversible: true } as const;

export const METRICS: readonly MetricDefinition[] = [
  {
    product: 'writes',
    metric: 'calls',
    unit: 'call',
    unitSize: 1,
    defaultPriceMicros: 500,
    defaultAllowance: 0,
    description:
      'Writes to public data: profiles, buzzes, reactions, comments, follows, studio assets, and deletes',
  },
  {
    product: 'otp',
    metric: 'sends',
    unit: 'message',
    unitSize: 1,
    defaultPriceMicros: 5_000,
    defaultAllowance: 0,
    description: 'In-app OTP messages sent',
  },
  {
    product: 'promo',
    metric: 'sends',
    unit: 'message',
    unitSize: 1,
    defaultPriceMicros: 2_000,
    defaultAllowance: 0,
    description: 'Promotional messages sent',
  },
  {
    product: 'ai',
    metric: 'generate_calls',
    unit: 'call',
    unitSize: 1,
    defaultPriceMicros: 2_000,
    defaultAllowance: 0,
    // Its answer's cost_milli counts whole thousandths of a dollar.
    priceStepMicros: 1_000,
    description: 'AI text generation calls',
  },
  {
    product: 'ai',
    metric: 'chat_calls',
    unit: 'call',
    unitSize: 1,
    defaultPriceMicros: 3_000,
    defaultAllowance: 0,
    description: 'AI chat bot replies',
  },
  {
    product: 'ai',
    metric: 'moderate_calls',
    unit: 'call',
    unitSize: 1,
    defaultPriceMicros: 500,
    defaultAllowance: 0,
    description: 'AI text moderation calls',
  },
  {
    product: 'chat',
    metric: 'monthly_active_users',
    unit: 'user',
    unitSize: 1,
    defaultPriceMicros: 10_000,
    defaultAllowance: 100,
    description: 'Chat users with at least one login in the month; messages are not charged',
  },
  ...minutes('live', 'Live streams', { hd: 1_000, fhd: 2_000, '4k': 4_000, audio: 400 }),
  ...minutes('calls', 'Calls', { hd: 1_500, fhd: 3_000, '4k': 6_000, audio: 500 }),
  {
    product: 'storage',
    metric: 'gb_days',
    unit: 'GB-day',
    unitSize: GB,
    defaultPriceMicros: 700,
    defaultAllowance: 30 * GB,
    description: 'Stored bytes, metered daily (one GB kept for a day is one GB-day)',
  },
  {
    product: 'storage',
    metric: 'uploads',
    unit: 'upload',
    unitSize: 1,
    defaultPriceMicros: 100,
    defaultAllowance: 1_000,
    description: 'Uploads reserved',
  },
  {
    product: 'storage',
    metric: 'signed_urls',
    unit: 'URL',
    unitSize: 1,
    defaultPriceMicros: 10,
    defaultAllowance: 10_000,
    description: 'Signed read URLs issued (delivery itself is not charged)',
  },
  {
    product: 'bandwidth',
    metric: 'gb',
    unit: 'GB',
    unitSize: GB,
    defaultPriceMicros: 50_000,
    defaultAllowance: 10 * GB,
    description: 'Response bytes of API reads',
  },
];

/** The products whose prices the price table also groups under `realtime`. */
export const REALTIME_PRODUCTS = ['chat', 'live', 'calls'] as const;

export function metricKey(product: string, metric: string): string {
  return `${product}.${metric}`;
}

export const METRICS_BY_KEY: ReadonlyMap<string, MetricDefinition> = new Map(
  METRICS.map((definition) => [metricKey(definition.product, definition.metric), definition]),
);

/** A metric as priced right now: the shipped definition with the operator's overrides applied. */
export interface Price {
  product: string;
  metric: string;
  unit: string;
  unitSize: number;
  priceMicros: number;
  allowance: number;
}

export const OverrideRow = z.object({ product: z.string(), metric: z.string(), value: z.number().int() });
