import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import { externalId } from '../../platform/identities.js';
import { literalUnion } from '../../platform/schemas.js';

export const KINDS = ['live', 'call', 'audio'] as const;
export type Kind = (typeof KINDS)[number];
export const QUALITIES = ['hd', 'fhd', '4k'] as const;
export type Quality = (typeof QUALITIES)[number];

export const MIN_LIVE_TTL = 60;
export const MAX_LIVE_TTL = 86_400;
export const DEFAULT_LIVE_TTL = 7_200;

/** Video quality by the short side of the frame: 720p and below is hd, up to 1080p fhd, beyond 4k. */
export function qualityOfDimensions(width: number, height: number): Quality {
  const shortSide = Math.min(width, height);
  if (shortSide <= 720) return 'hd';
  if (shortSide <= 1080) return 'fhd';
  return '4k';
}

export function higherQuality(a: Quality, b: Quality | null | undefined): Quality {
  return b && QUALITIES.indexOf(b) > QUALITIES.indexOf(a) ? b : a;
}

/** Who publishes by default: call and audio rooms are conversations, live streams have viewers. */
export const PUBLISHES_BY_DEFAULT: Record<Kind, boolean> = { live: false, call: true, audio: true };

export const LiveTokenRequest = Type.Object(
  {
    room: externalId('Your room name'),
    identity: externalId('Your user id, the same as its chat user_id'),
    kind: Type.Optional(
      literalUnion(KINDS, {
        description: 'live (a stream with viewers), call, or audio (microphones only); default live',
      }),
    ),
    publish: Type.Optional(
      Type.Boolean({
        description: 'Whether this participant publishes; default false for live, true for call and audio',
      }),
    ),
    ttl_seconds: Type.Integer({ minimum: MIN_LIVE_TTL, maximum: MAX_LIVE_TTL, default: DEFAULT_LIVE_TTL }),
    quality: Type.Optional(literalUnion(QUALITIES, { description: 'Declared video quality; default hd' })),
  },
  { additionalProperties: false },
);

export const LiveTokenResponse = Type.Object(
  {
    url: Type.String({ description: 'The LiveKit WebSocket URL' }),
    token: Type.String({ description: 'A LiveKit access token (JWT)' }),
    room: Type.String({
      description:
        'The app-scoped room name the token joins: the app’s prefix, a dot, then your room name as sent',
    }),
    expires_in: Type.Integer({ description: 'Seconds until the token expires' }),
  },
  { additionalProperties: false },
);

/** The participant attributes a token carries: how its minutes are priced when they are metered. */
export const ATTRIBUTE_KIND = 'svc.kind';
export const ATTRIBUTE_QUALITY = 'svc.quality';
export const ATTRIBUTE_PUBLISHER = 'svc.publisher';
/** The org (its id) a participant calls for: its minutes are attributed to the org. */
export const ATTRIBUTE_ORG = 'svc.org';

export const OpenSessionRow = z.object({
  participant_sid: z.string(),
  room: z.string(),
  identity: z.string(),
  app_id: z.string(),
  account_id: z.string(),
  mode: z.enum(['live', 'test']),
  kind: z.enum(KINDS),
  declared_quality: z.enum(QUALITIES),
  published_quality: z.enum(QUALITIES).nullable(),
  org_id: z.string().nullable(),
  joined_at: z.date(),
  last_seen_at: z.date(),
  missing_since: z.date().nullable(),
});
export type OpenSessionRow = z.infer<typeof OpenSessionRow>;
