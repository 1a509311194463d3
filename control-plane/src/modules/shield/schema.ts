import { Type } from '@sinclair/typebox';

export const VERDICTS = ['ok', 'suspicious', 'bot', 'block'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** A ticket proves a recent check, not a standing permission: five minutes. */
export const TICKET_TTL_SECONDS = 300;
/** Spec thresholds: more than 6 viewers from one address on one scope in a UTC day, more than 20. */
export const SUSPICIOUS_ABOVE = 6;
export const BLOCK_ABOVE = 20;
/** More than 120 tickets a minute from one address get 429 and no ticket. */
export const TICKETS_PER_MINUTE = 120;
export const MAX_REPORT_DAYS = 30;
export const BUSIEST_ADDRESSES = 10;
/**
 * A report reads each day's 200 busiest (scope, address) pairs, and looks up the other days' hits of
 * the likeliest 100: some 9,000 pairs for 30 days, however busy the app. When that cannot rank
 * exactly, it reads each day's 1,000 busiest once more.
 */
export const BUSIEST_READS_PER_DAY = [200, 1_000] as const;
export const BUSIEST_COMPLETED = 100;

/**
 * Automation announced by the user agent: headless and driven browsers, HTTP libraries and command
 * line tools, crawlers. The one place this list lives.
 */
export const AUTOMATION_USER_AGENT =
  /headlesschrome|headless|phantomjs|puppeteer|playwright|selenium|webdriver|electron|curl\/|wget\/|python-requests|python-urllib|aiohttp|httpx|go-http-client|okhttp|java\/|apache-httpclient|node-fetch|undici|axios|got \(|libwww-perl|scrapy|bot\b|crawler|spider|slurp|bingpreview|facebookexternalhit/i;

export const TicketRequest = Type.Object(
  {
    subject: Type.String({
      minLength: 1,
      maxLength: 256,
      description: 'Who is being checked, e.g. the viewer’s id',
    }),
    scope: Type.String({ minLength: 1, maxLength: 128, description: 'What for, e.g. a stream or a form' }),
  },
  { additionalProperties: false },
);

export const TicketResponse = Type.Object(
  {
    ticket: Type.String({
      description: '<payload>.<signature>: verify it on your server with shield_secret',
    }),
    verdict: Type.Union(VERDICTS.map((v) => Type.Literal(v))),
    reason: Type.String(),
    expires_at: Type.Integer({ description: 'Epoch seconds' }),
  },
  { additionalProperties: false },
);

export const ReportQuery = Type.Object(
  { days: Type.Integer({ minimum: 1, maximum: MAX_REPORT_DAYS, default: 1 }) },
  { additionalProperties: false },
);

export const ReportResponse = Type.Object(
  {
    verdicts: Type.Object(
      { ok: Type.Integer(), suspicious: Type.Integer(), bot: Type.Integer(), block: Type.Integer() },
      { additionalProperties: false },
    ),
    busiest_addresses: Type.Array(
      Type.Object(
        {
          scope: Type.String(),
          address: Type.String({
            description: 'The address hashed and shortened; raw addresses are never kept',
          }),
          viewers: Type.Integer({ description: 'The most distinct subjects of any one day' }),
          hits: Type.Integer({ description: 'Tickets over the days' }),
        },
        { additionalProperties: false },
      ),
      {
        description:
          `The ${BUSIEST_ADDRESSES} (scope, address) pairs with the most tickets over the days, most first.` +
          ` Ranked from each day's ${BUSIEST_READS_PER_DAY[0]} busiest pairs (${BUSIEST_READS_PER_DAY[1]}` +
          " when that cannot rank exactly), completed with their other days' tickets: exact whenever the" +
          ' busiest stand out from the rest, as busy addresses do.',
      },
    ),
  },
  { additionalProperties: false },
);
