import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import { commaSeparated } from './config/load.js';
import type { Container } from './container.js';
import { dashboardOn } from './dashboard/index.js';
import { COST_HEADER } from './http/context.js';
import { registerErrorHandling, renderError } from './http/error-handler.js';
import { createHttpMetrics, type HttpMetrics } from './http/metrics.js';
import { markOptionalInputs, shareErrorBody } from './http/openapi.js';
import { allowedMethodsOf, registerRoutes } from './http/pipeline.js';
import { registerSerialization } from './http/serialization.js';
import { registerValidation } from './http/validation.js';
import { aboutRoutes } from './modules/about/routes.js';
import { aiRoutes } from './modules/ai/routes.js';
import { billingRoutes } from './modules/billing/routes.js';
import { chatRoutes } from './modules/chat/routes.js';
import { liveRoutes } from './modules/live/routes.js';
import { mediaRoutes } from './modules/media/routes.js';
import { messagingRoutes } from './modules/messaging/routes.js';
import { businessRoutes } from './modules/orgs/business-routes.js';
import { circleRoutes } from './modules/orgs/circle-routes.js';
import { orgRoutes } from './modules/orgs/routes.js';
import { pricingRoutes } from './modules/pricing/routes.js';
import { realtimeRoutes } from './modules/realtime/routes.js';
import { shieldRoutes } from './modules/shield/routes.js';
import { momentRoutes } from './modules/social/moments-routes.js';
import { socialRoutes } from './modules/social/routes.js';
import { storageRoutes } from './modules/storage/routes.js';
import { studioRoutes } from './modules/studio/routes.js';
import { systemRoutes } from './modules/system/routes.js';
import { userRoutes } from './modules/users/routes.js';
import { webhookRoutes } from './modules/webhooks/routes.js';
import { EXTERNAL_ID_MAX_BYTES } from './platform/identities.js';
import { formatUsd } from './platform/money.js';
import { errorForLog, requestForLog } from './platform/redaction.js';
import { type Listener, listenerOf, type Route } from './platform/route.js';

export const API_VERSION = '1.1.0';

/** Keeps a caller's request id when it is sane, so one id follows a request across services. */
function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && /^[\w.-]{1,64}$/.test(header) ? header : randomUUID();
}

function trustProxy(setting: string): string[] | false {
  const entries = commaSeparated(setting);
  return entries.length > 0 ? entries : false;
}

export interface BuildAppOptions {
  /** false for none; else pino options over the defaults (a test's level and stream). */
  logger?: false | { level?: string; stream?: { write(line: string): void } };
  /** More declared operations (tests and benchmarks add probes through the same pipeline). */
  routes?: Route[];
  /** Which listener's operations this app serves (default public); see `listenerOf`. */
  listener?: Listener;
  /** Shared by a control plane's two listeners, so that /metrics reports both. */
  metrics?: HttpMetrics;
}

export async function buildApp(container: Container, options: BuildAppOptions = {}) {
  const app = Fastify({
    logger:
      options.logger === false
        ? false
        : {
            level: container.settings.SVC_LOG_LEVEL,
            // Keys travel in these headers; pino drops them even if a serializer ever logs headers.
            redact: [
              'req.headers.authorization',
              'req.headers["x-api-key"]',
              'req.headers["x-publishable-key"]',
            ],
            // Errors without statement parameters, rows or the secrets PostgreSQL quotes in messages.
            serializers: { err: errorForLog, req: requestForLog },
            ...options.logger,
          },
    requestIdHeader: false,
    genReqId: (request) => requestId(request.headers['x-request-id']),
    trustProxy: trustProxy(container.settings.SVC_TRUST_PROXY),
    // A path fastify's router refuses (a parameter over 128 characters, bad percent-encoding) gets
    // the spec's error body too.
    frameworkErrors: renderError,
    // An app's id travels in paths (DELETE /v1/realtime/chat/tokens/{user_id}): up to 128 bytes of
    // UTF-8, which is at most 128 UTF-16 units once decoded, where the router measures it.
    routerOptions: { maxParamLength: EXTERNAL_ID_MAX_BYTES },
    // A client that trickles its headers or body is cut off (408) instead of holding a socket forever.
    requestTimeout: container.settings.SVC_REQUEST_TIMEOUT_MS,
    http: {
      headersTimeout: Math.ceil(container.settings.SVC_REQUEST_TIMEOUT_MS / 3),
      // Node checks these deadlines on this interval (30 s by default, later than a short deadline).
      connectionsCheckingInterval: Math.min(1_000, container.settings.SVC_REQUEST_TIMEOUT_MS / 4),
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  registerValidation(app);
  registerSerialization(app);

  container.redis.on('error', (error: Error) => app.log.warn({ err: error }, 'redis connection error'));
  app.decorateRequest('principal', null);
  app.decorateRequest('costMicros', 0);
  app.decorateRequest('admitted', false);
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // Every response states what the call was charged, errors included (they cost nothing).
  app.addHook('onSend', async (request, reply) => {
    reply.header(COST_HEADER, formatUsd(request.costMicros));
  });
  const metrics = options.metrics ?? createHttpMetrics();
  metrics.observe(app);
  const listener = options.listener ?? 'public';

  // The OpenAPI document is the public listener's, and describes only its operations.
  if (listener === 'public')
    await app.register(swagger, {
      transformObject: (documentObject) =>
        'openapiObject' in documentObject
          ? shareErrorBody(markOptionalInputs(documentObject.openapiObject))
          : documentObject.swaggerObject,
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Realtime, Messaging, Storage and Public-Data API',
          version: API_VERSION,
          description:
            'One API key and one prepaid balance for chat, live, storage, shield, messaging and AI.',
        },
        servers: [{ url: container.settings.SVC_PUBLIC_URL }],
        components: {
          securitySchemes: {
            bearerKey: {
              type: 'http',
              scheme: 'bearer',
              description: 'Secret key: svc_live_… or svc_test_…',
            },
            apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
            publishableKey: { type: 'apiKey', in: 'header', name: 'X-Publishable-Key' },
            userToken: {
              type: 'http',
              scheme: 'bearer',
              bearerFormat: 'JWT',
              description: 'User token (ES256 JWT) minted by POST /v1/users/{user_id}/tokens',
            },
          },
        },
      },
    });

  // Every operation of the service, declared by its module (the order is the OpenAPI document's), on
  // the listener it belongs to.
  const routes = [
    ...systemRoutes({ probes: container.probes, metrics: metrics.registry, openapi: () => app.swagger() }),
    ...pricingRoutes(container.prices),
    ...billingRoutes(container.billing),
    ...realtimeRoutes(container.realtime),
    ...chatRoutes(container.chat),
    ...liveRoutes(container.live),
    ...storageRoutes(container.storage),
    ...shieldRoutes(container.shield),
    ...webhookRoutes(container.webhooks),
    ...userRoutes(container.userTokens),
    ...socialRoutes(container.social),
    ...aboutRoutes(container.about),
    ...messagingRoutes(container.messaging),
    ...orgRoutes(container.orgs),
    ...businessRoutes(container.businesses, container.circles),
    ...circleRoutes(container.circles),
    ...aiRoutes(container.ai),
    ...momentRoutes(container.moments),
    ...studioRoutes(container.studio),
    ...mediaRoutes(container.media),
    ...(options.routes ?? []),
  ];
  const served = routes.filter((declared) => listenerOf(declared) === listener);
  registerErrorHandling(app, allowedMethodsOf(served));
  // The developer dashboard is for people, with sessions of its own: the public listener, never the API's pipeline.
  if (listener === 'public') await dashboardOn(app, container);
  registerRoutes(app, served, {
    keys: container.accounts.resolver,
    users: container.userTokens.verifier,
    clock: container.clock,
    admission: container.admission,
    metering: container.metering,
    accrual: container.accrual,
    idempotency: container.idempotency,
    internalSecrets: {
      ejabberd: container.settings.SVC_EJABBERD_AUTH_SECRET,
      minio: container.settings.SVC_MINIO_WEBHOOK_SECRET,
    },
  });
  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
