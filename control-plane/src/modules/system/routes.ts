import { Type } from '@sinclair/typebox';
import type { Registry } from 'prom-client';
import type { Probe } from '../../adapters/probes.js';
import { route } from '../../platform/route.js';
import { HealthResponse, ReadinessResponse } from './schema.js';
import { watchDependencies } from './service.js';

export interface SystemDeps {
  probes: Record<string, Probe>;
  metrics: Registry;
  openapi: () => unknown;
}

/** Process health, dependency readiness, Prometheus metrics and the OpenAPI document. No key needed. */
export const systemRoutes = (deps: SystemDeps) => {
  const dependencies = watchDependencies(deps.probes);
  return [
    route({
      operationId: 'system.health',
      method: 'GET',
      url: '/healthz',
      auth: 'public',
      tags: ['system'],
      summary: 'The process is up (always 200 while it serves), and which dependencies are down',
      description:
        'Liveness: 200 as long as the process answers, so that a supervisor never restarts it for a dependency that is away. The body names the dependencies that did not answer their last probe (a round starts at most a second after the last one ended); /readyz answers 503 while any is down.',
      response: HealthResponse,
      handler: async () => {
        const { checks, failures } = await dependencies();
        const down = failures.map((failure) => failure.name);
        return { status: down.length === 0 ? ('ok' as const) : ('degraded' as const), down, checks };
      },
    }),
    route({
      operationId: 'system.ready',
      method: 'GET',
      url: '/readyz',
      auth: 'public',
      tags: ['system'],
      summary: 'PostgreSQL, Redis and each bundled server are reachable',
      description:
        'Readiness: 503 while any dependency did not answer its last probe. The probes are those /healthz answers from: however often either is asked, a round of them starts at most a second after the last one ended.',
      response: ReadinessResponse,
      otherResponses: { 503: ReadinessResponse },
      handler: async ({ reply, log }) => {
        const readiness = await dependencies();
        if (readiness.ready) return { status: 'ready' as const, checks: readiness.checks };
        log.warn({ failures: readiness.failures }, 'not ready');
        reply.status(503);
        return { status: 'unavailable' as const, checks: readiness.checks };
      },
    }),
    route({
      operationId: 'system.metrics',
      method: 'GET',
      url: '/metrics',
      auth: 'public',
      listener: 'internal',
      tags: ['system'],
      summary: 'Prometheus metrics',
      hidden: true,
      response: Type.String(),
      handler: async ({ reply }) => {
        reply.header('content-type', deps.metrics.contentType);
        return deps.metrics.metrics();
      },
    }),
    route({
      operationId: 'system.openapi',
      method: 'GET',
      url: '/v1/openapi.json',
      auth: 'public',
      tags: ['system'],
      summary: 'This document',
      hidden: true,
      response: Type.Unknown(),
      handler: async () => deps.openapi(),
    }),
  ];
};
