import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, { type FastifyPluginAsync, type FastifyServerOptions } from 'fastify';
import type { Container } from './container.js';
import { requirePublishableKey, requireSecretKey } from './http/auth.js';
import { setCostHeader } from './http/context.js';
import { registerErrorHandling } from './http/error-handler.js';
import { requireInternalSecret } from './http/internal-auth.js';
import { meterReadBandwidth } from './http/metering.js';
import { registerMetrics } from './http/metrics.js';
import { billingRoutes } from './modules/billing/routes.js';
import { chatCallbackRoutes, chatRoutes } from './modules/chat/routes.js';
import { liveRoutes, liveWebhookRoutes } from './modules/live/routes.js';
import { pricingRoutes } from './modules/pricing/routes.js';
import { realtimeRoutes } from './modules/realtime/routes.js';
import { shieldReportRoutes, shieldTicketRoutes } from './modules/shield/routes.js';
import { storageEventRoutes, storageRoutes } from './modules/storage/routes.js';
import { systemRoutes } from './modules/system/routes.js';

export const API_VERSION = '1.1.0';

/** Keeps a caller's request id when it is sane, so one id follows a request across services. */
function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && /^[\w.-]{1,64}$/.test(header) ? header : randomUUID();
}

function trustProxy(setting: string): string[] | false {
  const entries = setting
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  return entries.length > 0 ? entries : false;
}

export interface BuildAppOptions {
  logger?: FastifyServerOptions['logger'];
  /** More routes behind the secret-key pipeline (benchmarks and tests mount probes here). */
  keyedRoutes?: FastifyPluginAsync[];
}

export async function buildApp(container: Container, options: BuildAppOptions = {}) {
  const app = Fastify({
    logger: options.logger ?? {
      level: container.settings.SVC_LOG_LEVEL,
      // Keys travel in these headers; pino drops them even if a serializer ever logs headers.
      redact: ['req.headers.authorization', 'req.headers["x-api-key"]', 'req.headers["x-publishable-key"]'],
    },
    requestIdHeader: false,
    genReqId: (request) => requestId(request.headers['x-request-id']),
    trustProxy: trustProxy(container.settings.SVC_TRUST_PROXY),
    ajv: {
      customOptions: { allErrors: true, removeAdditional: false, coerceTypes: 'array', useDefaults: true },
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  container.redis.on('error', (error: Error) => app.log.warn({ err: error }, 'redis connection error'));
  app.decorateRequest('principal', null);
  app.decorateRequest('costMicros', 0);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // Every response states its cost, errors included (they cost nothing).
  app.addHook('onSend', async (request, reply) => {
    setCostHeader(reply, request.costMicros);
  });
  registerErrorHandling(app);
  const metrics = registerMetrics(app);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Realtime, Messaging, Storage and Public-Data API',
        version: API_VERSION,
        description: 'One API key and one prepaid balance for chat, live, storage, shield, messaging and AI.',
      },
      servers: [{ url: container.settings.SVC_PUBLIC_URL }],
      components: {
        securitySchemes: {
          bearerKey: { type: 'http', scheme: 'bearer', description: 'Secret key: svc_live_… or svc_test_…' },
          apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
          publishableKey: { type: 'apiKey', in: 'header', name: 'X-Publishable-Key' },
        },
      },
    },
  });

  await app.register(systemRoutes, { probes: container.probes, metrics });
  // The servers' callbacks, authenticated with the internal secret.
  await app.register(async (internal) => {
    requireInternalSecret(internal, container.settings.SVC_INTERNAL_SECRET);
    await internal.register(chatCallbackRoutes, { chat: container.chat });
    await internal.register(storageEventRoutes, { storage: container.storage });
  });
  // LiveKit signs its webhooks itself.
  await app.register(liveWebhookRoutes, { live: container.live });
  // The one endpoint clients call, with the publishable key.
  await app.register(async (publishable) => {
    requirePublishableKey(publishable, { accounts: container.accounts, limits: container.limits });
    await publishable.register(shieldTicketRoutes, { shield: container.shield });
  });
  // The keyed scope: every route registered inside passes the shared key pipeline first.
  await app.register(async (keyed) => {
    requireSecretKey(keyed, { accounts: container.accounts, limits: container.limits });
    meterReadBandwidth(keyed, container.billing);
    await keyed.register(pricingRoutes, { pricing: container.pricing });
    await keyed.register(billingRoutes, { billing: container.billing });
    await keyed.register(realtimeRoutes, { realtime: container.realtime });
    await keyed.register(chatRoutes, { chat: container.chat });
    await keyed.register(liveRoutes, { live: container.live });
    await keyed.register(storageRoutes, { storage: container.storage });
    await keyed.register(shieldReportRoutes, { shield: container.shield });
    for (const routes of options.keyedRoutes ?? []) await keyed.register(routes);
  });
  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
