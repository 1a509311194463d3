import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ApiError } from '../../http/errors.js';
import { ErrorBody, ErrorResponses, SECRET_KEY_SECURITY } from '../../http/schemas.js';
import { LiveTokenRequest, LiveTokenResponse } from './schema.js';
import { type LiveService, WebhookSignatureError } from './service.js';

export const liveRoutes: FastifyPluginAsyncTypebox<{ live: LiveService }> = async (app, { live }) => {
  app.post(
    '/v1/realtime/live/tokens',
    {
      config: { operation: 'live.tokens.create' },
      schema: {
        tags: ['realtime'],
        summary: 'A LiveKit token for a live stream, a call or an audio room of the app',
        security: SECRET_KEY_SECURITY,
        body: LiveTokenRequest,
        response: { 200: LiveTokenResponse, 402: ErrorBody, 403: ErrorBody, ...ErrorResponses },
      },
    },
    async (request) => live.mintToken(request.principal!, request.body),
  );
};

/**
 * LiveKit's webhooks: a JWT in Authorization signs the body's SHA-256, so the body is kept as the
 * exact string that was sent (media type application/webhook+json).
 */
export const liveWebhookRoutes: FastifyPluginAsyncTypebox<{ live: LiveService }> = async (app, { live }) => {
  app.addContentTypeParser('application/webhook+json', { parseAs: 'string' }, (_request, body, done) =>
    done(null, body),
  );
  app.post(
    '/internal/livekit/webhook',
    { config: { operation: 'live.webhook' }, schema: { hide: true } },
    async (request) => {
      try {
        return await live.handleWebhook(String(request.body ?? ''), request.headers.authorization);
      } catch (error) {
        if (!(error instanceof WebhookSignatureError)) throw error;
        request.log.warn({ reason: error.message }, 'rejected a LiveKit webhook: bad or missing signature');
        throw new ApiError('authentication_error', 'The webhook signature does not verify');
      }
    },
  );
};
