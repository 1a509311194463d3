import type { Principal } from '../modules/accounts/schema.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller of a keyed endpoint, set by the key check. */
    principal: Principal | null;
    /** What this call costs, in micro-dollars; reported in X-Svc-Cost-Usd. */
    costMicros: number;
  }
  interface FastifyContextConfig {
    /** Operation id used by logs, metrics and OpenAPI alike, e.g. `billing.balance.get`. */
    operation?: string;
  }
}

export const COST_HEADER = 'x-svc-cost-usd';
