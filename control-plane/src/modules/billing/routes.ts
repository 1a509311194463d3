import { route } from '../../platform/route.js';
import { BalanceResponse, UsageQuery, UsageResponse } from './schema.js';
import type { BillingService } from './service.js';

export const billingRoutes = (billing: BillingService) => [
  route({
    operationId: 'billing.balance.get',
    method: 'GET',
    url: '/v1/realtime/balance',
    auth: 'secret-key',
    tags: ['usage and balance'],
    summary: 'Prepaid balance, what is owed, and the last 50 ledger movements, newest first',
    response: BalanceResponse,
    handler: ({ caller }) => billing.getBalance(caller.accountId),
  }),
  route({
    operationId: 'billing.usage.get',
    method: 'GET',
    url: '/v1/realtime/usage',
    auth: 'secret-key',
    tags: ['usage and balance'],
    summary: 'Usage and cost per day, product and metric, with the price table and free allowances',
    query: UsageQuery,
    response: UsageResponse,
    handler: ({ caller, query }) => billing.usageReport(caller.accountId, caller.mode, query.days),
  }),
];
