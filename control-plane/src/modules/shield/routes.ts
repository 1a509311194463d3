import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ApiError } from '../../http/errors.js';
import { ErrorBody, ErrorResponses, SECRET_KEY_SECURITY } from '../../http/schemas.js';
import { ReportQuery, ReportResponse, TicketRequest, TicketResponse } from './schema.js';
import { type ShieldService, TooManyTicketsError } from './service.js';

/** Browsers on any origin call the ticket endpoint with the publishable key. */
const CORS_HEADERS = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers':
    'x-svc-cost-usd, x-request-id, ratelimit-limit, ratelimit-remaining, ratelimit-reset',
};

/** The ticket endpoint, in a scope that takes the publishable key (X-Publishable-Key). */
export const shieldTicketRoutes: FastifyPluginAsyncTypebox<{ shield: ShieldService }> = async (
  app,
  { shield },
) => {
  app.addHook('onSend', async (_request, reply, payload) => {
    reply.headers(CORS_HEADERS);
    return payload;
  });
  app.options('/v1/realtime/shield/ticket', { schema: { hide: true } }, async (_request, reply) =>
    reply
      .code(204)
      .headers({
        'access-control-allow-methods': 'POST',
        'access-control-allow-headers': 'content-type, x-publishable-key',
        'access-control-max-age': '600',
      })
      .send(),
  );
  app.post(
    '/v1/realtime/shield/ticket',
    {
      config: { operation: 'shield.ticket.create' },
      schema: {
        tags: ['shield'],
        summary: 'A signed verdict about this client, for your server to verify with shield_secret',
        security: [{ publishableKey: [] }],
        body: TicketRequest,
        response: { 200: TicketResponse, ...ErrorResponses },
      },
    },
    async (request) => {
      try {
        return await shield.issueTicket(request.principal!, request.body, {
          address: request.ip,
          userAgent: request.headers['user-agent'] ?? '',
        });
      } catch (error) {
        if (error instanceof TooManyTicketsError)
          throw new ApiError('rate_limited', error.message, { headers: { 'retry-after': '60' } });
        throw error;
      }
    },
  );
};

export const shieldReportRoutes: FastifyPluginAsyncTypebox<{ shield: ShieldService }> = async (
  app,
  { shield },
) => {
  app.get(
    '/v1/realtime/shield/report',
    {
      config: { operation: 'shield.report.get' },
      schema: {
        tags: ['shield'],
        summary: 'Verdict counts and the busiest (hashed) addresses over the last 1-30 UTC days',
        security: SECRET_KEY_SECURITY,
        querystring: ReportQuery,
        response: { 200: ReportResponse, 404: ErrorBody, ...ErrorResponses },
      },
    },
    async (request) => shield.report(request.principal!, request.query.days),
  );
};
