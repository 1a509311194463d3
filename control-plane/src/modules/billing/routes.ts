import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorResponses, SECRET_KEY_SECURITY } from '../../http/schemas.js';
import { BalanceResponse, UsageQuery, UsageResponse } from './schema.js';
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
        security: SECRET_KEY_SECURITY,
        response: { 200: BalanceResponse, ...ErrorResponses },
      },
    },
    async (request) => billing.getBalance(request.principal!.accountId),
  );

  app.get(
    '/v1/realtime/usage',
    {
      config: { operation: 'billing.usage.get' },
      schema: {
        tags: ['usage and balance'],
        summary: 'Usage and cost per day, product and metric, with the price table and free allowances',
        security: SECRET_KEY_SECURITY,
        querystring: UsageQuery,
        response: { 200: UsageResponse, ...ErrorResponses },
      },
    },
    async (request) => {
      const { accountId, mode } = request.principal!;
      return billing.usageReport(accountId, mode, request.query.days);
    },
  );
};
