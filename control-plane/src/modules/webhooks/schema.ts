import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import { displayName, externalId } from '../../platform/identities.js';
import { EVENT_TYPES } from '../../platform/outbox.js';
import { Deleted, literalUnion, Page } from '../../platform/schemas.js';

/** Endpoints per app and key mode. */
export const MAX_ENDPOINTS = 20;
export const MAX_URL_LENGTH = 2_048;
export const MAX_PROFILE_IDS = 100;
/** The spec's rule: a 2xx within 5 seconds. */
export const DELIVERY_TIMEOUT_MS = 5_000;
/** What an attempt keeps of the receiver's answer. */
export const RESPONSE_EXCERPT_BYTES = 1_024;
/**
 * Delays before each retry after a failed attempt: 15 attempts over about three days and four hours,
 * each delay drawn within ±20% of its value, so receivers recovering from an outage are not hit by
 * every retry at once.
 */
export const RETRY_DELAYS_SECONDS = [
  5, 30, 120, 600, 1_800, 3_600, 7_200, 14_400, 28_800, 43_200, 43_200, 43_200, 43_200, 43_200,
] as const;
export const RETRY_JITTER = 0.2;
/**
 * An endpoint whose every attempt failed for this long is disabled, and its app told: longer than one
 * delivery's whole schedule, so it takes failures of events emitted on several days.
 */
export const DISABLE_AFTER_FAILING_MS = 5 * 86_400_000;
/**
 * A deleted endpoint's rows are purged once it has been deleted this long: an attempt under way when
 * it was deleted ends and is recorded first, and every replica's purge goes by its own clock's view of
 * the deletion time alike.
 */
export const PURGE_DELETED_AFTER_MS = 5 * 60_000;
/** Events, with their deliveries and attempts, are kept this long. */
export const EVENT_RETENTION_DAYS = 30;

/** Why an attempt got no answer: the sender's reasons, and a secret that no longer opens. */
export const ATTEMPT_FAILURES = [
  'timeout',
  'forbidden-address',
  'dns',
  'connection',
  'tls',
  'invalid-url',
  'secret-unavailable',
] as const;
export type AttemptFailure = (typeof ATTEMPT_FAILURES)[number];

export const EndpointRow = z.object({
  id: z.string(),
  app_id: z.string(),
  mode: z.enum(['live', 'test']),
  url: z.string(),
  description: z.string(),
  event_types: z.array(z.string()),
  profile_ids: z.array(z.string()).nullable(),
  enabled: z.boolean(),
  disabled_reason: z.string().nullable(),
  secret_hint: z.string(),
  failing_since: z.date().nullable(),
  created_at: z.date(),
  updated_at: z.date(),
});
export type EndpointRow = z.infer<typeof EndpointRow>;

export const DeliveryRow = z.object({
  id: z.string(),
  event_id: z.string(),
  event_type: z.string(),
  endpoint_id: z.string(),
  status: z.enum(['pending', 'succeeded', 'failed']),
  failures: z.number().int(),
  next_attempt_at: z.date().nullable(),
  created_at: z.date(),
  attempt_count: z.number().int(),
});
export type DeliveryRow = z.infer<typeof DeliveryRow>;

export const AttemptRow = z.object({
  delivery_id: z.string(),
  attempted_at: z.date(),
  status_code: z.number().int().nullable(),
  failure: z.string().nullable(),
  latency_ms: z.number().int(),
  response_excerpt: z.string(),
});
export type AttemptRow = z.infer<typeof AttemptRow>;

const EventTypes = Type.Array(literalUnion(EVENT_TYPES), {
  minItems: 1,
  maxItems: EVENT_TYPES.length,
  uniqueItems: true,
  description: `The events to deliver: ${EVENT_TYPES.join(', ')} (ping, from the test button, always)`,
});

const ProfileIds = Type.Union(
  [
    Type.Array(externalId('A profile id (the app user id)'), {
      minItems: 1,
      maxItems: MAX_PROFILE_IDS,
      uniqueItems: true,
    }),
    Type.Null(),
  ],
  {
    description: `For the profile events (buzz.*, sip.created, follow.created): only these profiles' activity, up to ${MAX_PROFILE_IDS}; null for every profile. Other events ignore it`,
  },
);

const Url = Type.String({
  minLength: 1,
  maxLength: MAX_URL_LENGTH,
  description:
    'https:// (plain http:// only for test keys, where the operator allows it); no credentials in it; redirects are not followed',
});

export const Endpoint = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    description: Type.String(),
    event_types: Type.Array(Type.String()),
    profile_ids: Type.Union([Type.Array(Type.String()), Type.Null()]),
    enabled: Type.Boolean(),
    disabled_reason: Type.Union([Type.Literal('failing'), Type.Null()], {
      description: 'failing: the service disabled it after five days of failed deliveries',
    }),
    secret_hint: Type.String({ description: 'The start and last four characters of the signing secret' }),
    failing_since: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'Since when every attempt has failed; null after any success',
    }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const EndpointWithSecret = Type.Object(
  {
    ...Endpoint.properties,
    secret: Type.String({
      description:
        'The signing secret (whsec_…): shown now and never again. Keep it on your server; rotate it if it leaks',
    }),
  },
  { additionalProperties: false },
);

export const CreateEndpoint = Type.Object(
  {
    url: Url,
    event_types: EventTypes,
    profile_ids: Type.Optional(ProfileIds),
    description: Type.Optional(displayName(256, 'What the endpoint is for')),
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { additionalProperties: false },
);

export const UpdateEndpoint = Type.Object(
  {
    url: Type.Optional(Url),
    event_types: Type.Optional(EventTypes),
    profile_ids: Type.Optional(ProfileIds),
    description: Type.Optional(Type.Union([displayName(256, 'What the endpoint is for'), Type.Literal('')])),
    enabled: Type.Optional(
      Type.Boolean({ description: 'true also clears a disabled_reason and starts deliveries again' }),
    ),
  },
  { additionalProperties: false },
);

export const EndpointParams = Type.Object(
  { endpoint_id: Type.String({ maxLength: 64 }) },
  { additionalProperties: false },
);

export const DeliveryParams = Type.Object(
  { endpoint_id: Type.String({ maxLength: 64 }), delivery_id: Type.String({ maxLength: 64 }) },
  { additionalProperties: false },
);

const Cursor = Type.Optional(
  Type.String({ maxLength: 200, description: 'next_cursor of the previous page' }),
);

export const ListQuery = Type.Object(
  { limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }), cursor: Cursor },
  { additionalProperties: false },
);

export const DeliveryStatus = literalUnion(['pending', 'succeeded', 'failed'] as const);

export const DeliveryListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 20 }),
    cursor: Cursor,
    status: Type.Optional(DeliveryStatus),
  },
  { additionalProperties: false },
);

export const Attempt = Type.Object(
  {
    attempted_at: Type.String({ format: 'date-time' }),
    status_code: Type.Union([Type.Integer(), Type.Null()], { description: "The receiver's status" }),
    failure: Type.Union([literalUnion(ATTEMPT_FAILURES), Type.Null()], {
      description: 'Why no answer came; null when the receiver answered',
    }),
    latency_ms: Type.Integer(),
    response_excerpt: Type.String({ description: `The first ${RESPONSE_EXCERPT_BYTES} bytes of the answer` }),
  },
  { additionalProperties: false },
);

export const Delivery = Type.Object(
  {
    id: Type.String(),
    event_id: Type.String({ description: 'The same in every attempt and redelivery (webhook-id)' }),
    event_type: Type.String(),
    status: DeliveryStatus,
    attempts: Type.Integer({ description: 'Attempts made so far' }),
    next_attempt_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    last_attempt: Type.Union([Attempt, Type.Null()]),
  },
  { additionalProperties: false },
);

export const DeliveryWithAttempts = Type.Object(
  {
    ...Delivery.properties,
    attempt_log: Type.Array(Attempt, { description: 'Every attempt, newest first (the last 100)' }),
  },
  { additionalProperties: false },
);

export const EndpointPage = Page(Endpoint, 'Newest first');
export const DeliveryPage = Page(Delivery, 'Newest first');
export const EndpointDeleted = Deleted();
