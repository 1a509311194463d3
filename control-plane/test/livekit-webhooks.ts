import { createHash, randomUUID } from 'node:crypto';
import { AccessToken } from 'livekit-server-sdk';
import type { TestContext } from './support.js';

/** A webhook as LiveKit sends it: protojson body, signed by a JWT carrying the body's SHA-256. */
export async function webhook(ctx: TestContext, event: Record<string, unknown>, sign = true) {
  const body = JSON.stringify({
    id: `EV_${randomUUID()}`,
    createdAt: String(Math.floor(ctx.clock.now().getTime() / 1000)),
    ...event,
  });
  const headers: Record<string, string> = { 'content-type': 'application/webhook+json' };
  if (sign) {
    const token = new AccessToken(
      ctx.container.settings.SVC_LIVEKIT_API_KEY,
      ctx.container.settings.SVC_LIVEKIT_API_SECRET,
    );
    token.sha256 = createHash('sha256').update(body).digest('base64');
    headers.authorization = await token.toJwt();
  }
  return { body, headers };
}

export const post = (ctx: TestContext, delivery: { body: string; headers: Record<string, string> }) =>
  ctx.internal.inject({
    method: 'POST',
    url: '/internal/livekit/webhook',
    headers: delivery.headers,
    payload: delivery.body,
  });

export const deliver = async (ctx: TestContext, event: Record<string, unknown>, sign = true) =>
  post(ctx, await webhook(ctx, event, sign));

/** A participant as LiveKit reports it; sids are unique per run, as LiveKit's are. */
export function participant(name: string, room: string, attributes: Record<string, string>, joinedAt: Date) {
  const sid = `${name}_${randomUUID()}`;
  return {
    room: { name: room },
    participant: {
      sid,
      identity: `user-${sid}`,
      joinedAt: String(Math.floor(joinedAt.getTime() / 1000)),
      joinedAtMs: String(joinedAt.getTime()),
      attributes,
    },
  };
}

/** The attributes a token of this service gives a participant. */
export const attributes = (
  kind: 'live' | 'call' | 'audio',
  quality: 'hd' | 'fhd' | '4k',
  publisher = true,
) => ({
  'svc.kind': kind,
  'svc.quality': quality,
  'svc.publisher': String(publisher),
});
