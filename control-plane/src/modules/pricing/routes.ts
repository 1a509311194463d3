import type { Prices } from '../../platform/prices.js';
import { route } from '../../platform/route.js';
import { PriceTableResponse } from './schema.js';
import { presentPriceTable } from './service.js';

export const pricingRoutes = (prices: Prices) => [
  route({
    operationId: 'pricing.get',
    method: 'GET',
    url: '/v1/pricing',
    auth: 'secret-key',
    tags: ['usage and balance'],
    summary: 'The live price table, with its realtime section and the free monthly allowances',
    response: PriceTableResponse,
    handler: async () => presentPriceTable(await prices.table()),
  }),
];
