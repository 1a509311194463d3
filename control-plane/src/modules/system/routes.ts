import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { Registry } from 'prom-client';
import type { Probe } from '../../adapters/probes.js';
import { HealthResponse, ReadinessResponse } from './schema.js';
import { checkReadiness } from './service.js';

export interface SystemRoutesDeps {
  probes: Record<string, Probe>;
  metrics: Registry;
}

/** Process health, dependency readiness, Prometheus metrics and the OpenAPI document. No key needed. */
export const systemRoutes: FastifyPluginAsyncTypebox<SystemRoutesDeps> = async (app, deps) => {
  app.get(
    '/healthz',
    {
      config: { operation: 'system.health' },
      schema: { tags: ['system'], summary: 'The process is up', response: { 200: HealthResponse } },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      config: { operation: 'system.ready' },
      schema: {
        tags: ['system'],
        summary: 'PostgreSQL, Redis and each bundled server are reachable',
        response: { 200: ReadinessResponse, 503: ReadinessResponse },
      },
    },
    async (request, reply) => {
      const readiness = await checkReadiness(deps.probes);
      if (!readiness.ready) {
        request.log.warn({ failures: readiness.failures }, 'not ready');
        return reply.code(503).send({ status: 'unavailable', checks: readiness.checks });
      }
      return { status: 'ready' as const, checks: readiness.checks };
    },
  );

  app.get(
    '/metrics',
    { config: { operation: 'system.metrics' }, schema: { hide: true } },
    async (_request, reply) => reply.type(deps.metrics.contentType).send(await deps.metrics.metrics()),
  );

  app.get('/v1/openapi.json', { config: { operation: 'system.openapi' }, schema: { hide: true } }, async () =>
    app.swagger(),
  );
};
