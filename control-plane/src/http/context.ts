import type { FastifyReply } from 'fastify';
import { formatUsd } from '../lib/money.js';
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
    /** Set on endpoints the Free plan cannot call (402 PAYMENT_REQUIRED). */
    requiresPaidPlan?: boolean;
  }
}

export const COST_HEADER = 'x-svc-cost-usd';

/** States what a call cost. Called again when a later hook adds to the cost (read bandwidth). */
export function setCostHeader(reply: FastifyReply, costMicros: number): void {
  reply.header(COST_HEADER, formatUsd(costMicros));
}
