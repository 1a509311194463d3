import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorResponses } from '../../http/schemas.js';
import { BalanceResponse } from './schema.js';
import type { BillingService } from './service.js';

export const billingRoutes: FastifyPluginAsyncTypebox<{ billing: BillingService }> = async (
  app,
  { billing },
) => {
  app.get(
    '/v1/realtime/balance',
    {
      config: { operation: 'billing.balance.get' },
      schema: {
        tags: ['usage and balance'],
        summary: 'Prepaid balance and the last 50 ledger movements, newest first',
        security: [{ bearerKey: [] }, { apiKeyHeader: [] }],
        response: { 200: BalanceResponse, ...ErrorResponses },
      },
    },
    async (request) => billing.getBalance(request.principal!.accountId),
  );
};
