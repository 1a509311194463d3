import { Type } from '@sinclair/typebox';
import { route } from '../../platform/route.js';
import { LiveTokenRequest, LiveTokenResponse } from './schema.js';
import type { LiveService } from './service.js';

export const liveRoutes = (live: LiveService) => [
  route({
    operationId: 'live.tokens.create',
    method: 'POST',
    url: '/v1/realtime/live/tokens',
    auth: 'secret-key',
    tags: ['realtime'],
    summary: 'A LiveKit token for a live stream, a call or an audio room of the app',
    body: LiveTokenRequest,
    response: LiveTokenResponse,
    errors: [403],
    needsBalance: true,
    handler: ({ caller, body }) => live.mintToken(caller, body),
  }),
  // LiveKit's webhooks: a JWT in Authorization signs the body's SHA-256, so the body is kept as the
  // exact string that was sent (media type application/webhook+json).
  route({
    operationId: 'live.webhook',
    method: 'POST',
    url: '/internal/livekit/webhook',
    auth: 'signed',
    tags: ['internal'],
    summary: 'LiveKit’s signed webhook',
    hidden: true,
    rawBody: 'application/webhook+json',
    body: Type.String(),
    response: Type.Object({ applied: Type.Boolean() }),
    handler: ({ body, headers }) => live.handleWebhook(body, headers.authorization as string | undefined),
  }),
];
