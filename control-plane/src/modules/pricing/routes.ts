import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorResponses, SECRET_KEY_SECURITY } from '../../http/schemas.js';
import { PriceTableResponse } from './schema.js';
import { type PricingService, presentPriceTable } from './service.js';

export const pricingRoutes: FastifyPluginAsyncTypebox<{ pricing: PricingService }> = async (
  app,
  { pricing },
) => {
  app.get(
    '/v1/pricing',
    {
      config: { operation: 'pricing.get' },
      schema: {
        tags: ['usage and balance'],
        summary: 'The live price table, with its realtime section and the free monthly allowances',
        security: SECRET_KEY_SECURITY,
        response: { 200: PriceTableResponse, ...ErrorResponses },
      },
    },
    async () => presentPriceTable(await pricing.priceTable()),
  );
};
