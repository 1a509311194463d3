import { route } from '../../platform/route.js';
import { AppSettingsPatch, AppSettingsResponse } from './schema.js';
import type { RealtimeService } from './service.js';

export const realtimeRoutes = (realtime: RealtimeService) => [
  route({
    operationId: 'realtime.app.setup',
    method: 'POST',
    url: '/v1/realtime/app',
    auth: 'secret-key',
    tags: ['realtime'],
    summary: 'Set up the app for realtime (idempotent): the same settings every time',
    response: AppSettingsResponse,
    handler: ({ caller }) => realtime.setup(caller),
  }),
  route({
    operationId: 'realtime.app.update',
    method: 'PATCH',
    url: '/v1/realtime/app',
    auth: 'secret-key',
    tags: ['realtime'],
    summary: 'Change archiving, products or the room size; applies to existing chat rooms too',
    body: AppSettingsPatch,
    response: AppSettingsResponse,
    errors: [409],
    handler: ({ caller, body }) => realtime.update(caller, body),
  }),
];
