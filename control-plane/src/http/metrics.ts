import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';

export interface HttpMetrics {
  registry: Registry;
  /** Counts an app's requests into the registry (both listeners report into one). */
  observe(app: FastifyInstance): void;
}

/** A registry per control plane, so that tests building several never share counters. */
export function createHttpMetrics(): HttpMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'svc_' });
  const labelNames = ['operation', 'method', 'status'] as const;
  const requests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests by operation id, method and status.',
    labelNames,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request latency by operation id, method and status.',
    labelNames,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });

  const observe = (app: FastifyInstance) =>
    app.addHook('onResponse', async (request, reply) => {
      // Declared operation ids, never raw URLs: ids in paths would make the label set unbounded.
      const labels = {
        operation: request.routeOptions.config.operationId ?? 'unmatched',
        method: request.method,
        status: String(reply.statusCode),
      };
      requests.inc(labels);
      duration.observe(labels, reply.elapsedTime / 1000);
    });
  return { registry, observe: (app) => void observe(app) };
}
