import type { FastifyInstance } from 'fastify';
import type { BillingService } from '../modules/billing/service.js';
import { setCostHeader } from './context.js';

/**
 * Reads are free, but their response bytes count as bandwidth: metered after the response is
 * built, for successful reads only, and charged as far as a live balance goes.
 */
export function meterReadBandwidth(app: FastifyInstance, billing: BillingService): void {
  app.addHook('onSend', async (request, reply, payload) => {
    const principal = request.principal;
    if (request.method !== 'GET' || !principal || reply.statusCode < 200 || reply.statusCode >= 300)
      return payload;
    const bytes = typeof payload === 'string' || Buffer.isBuffer(payload) ? Buffer.byteLength(payload) : 0;
    request.costMicros += await billing.meterAfter(principal, [
      { product: 'bandwidth', metric: 'gb', quantity: bytes },
    ]);
    setCostHeader(reply, request.costMicros);
    return payload;
  });
}
