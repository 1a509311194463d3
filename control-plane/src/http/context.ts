import type { Principal } from '../platform/caller.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller of a keyed operation, set by the key check. */
    principal: Principal | null;
    /** What this call was charged, in micro-dollars; reported in X-Svc-Cost-Usd. */
    costMicros: number;
    /** Whether the request went through admission (lockout, daily cap, balance). */
    admitted: boolean;
  }
  interface FastifyContextConfig {
    /** The declared operation id: a metric label and a log field. */
    operationId?: string;
  }
}

export const COST_HEADER = 'x-svc-cost-usd';
