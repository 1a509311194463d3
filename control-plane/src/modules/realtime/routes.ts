import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorBody, ErrorResponses, SECRET_KEY_SECURITY } from '../../http/schemas.js';
import { AppSettingsPatch, AppSettingsResponse } from './schema.js';
import type { RealtimeService } from './service.js';

export const realtimeRoutes: FastifyPluginAsyncTypebox<{ realtime: RealtimeService }> = async (
  app,
  { realtime },
) => {
  app.post(
    '/v1/realtime/app',
    {
      config: { operation: 'realtime.app.setup' },
      schema: {
        tags: ['realtime'],
        summary: 'Set up the app for realtime (idempotent): the same settings every time',
        security: SECRET_KEY_SECURITY,
        response: { 200: AppSettingsResponse, ...ErrorResponses },
      },
    },
    async (request) => realtime.setup(request.principal!),
  );

  app.patch(
    '/v1/realtime/app',
    {
      config: { operation: 'realtime.app.update' },
      schema: {
        tags: ['realtime'],
        summary: 'Change archiving, products or the room size; applies to existing rooms too',
        security: SECRET_KEY_SECURITY,
        body: AppSettingsPatch,
        response: { 200: AppSettingsResponse, 503: ErrorBody, ...ErrorResponses },
      },
    },
    async (request) => realtime.update(request.principal!, request.body),
  );
};
