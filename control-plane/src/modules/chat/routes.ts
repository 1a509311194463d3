import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorBody, ErrorResponses, SECRET_KEY_SECURITY } from '../../http/schemas.js';
import {
  AuthCallbackRequest,
  AuthCallbackResponse,
  ChatCredential,
  ChatTokenRequest,
  ChatUserParams,
  RevokeResponse,
  RoomRequest,
  RoomResponse,
} from './schema.js';
import type { ChatService } from './service.js';

const productResponses = { 402: ErrorBody, 403: ErrorBody, 503: ErrorBody, ...ErrorResponses };

export const chatRoutes: FastifyPluginAsyncTypebox<{ chat: ChatService }> = async (app, { chat }) => {
  app.post(
    '/v1/realtime/chat/tokens',
    {
      config: { operation: 'chat.tokens.create' },
      schema: {
        tags: ['realtime'],
        summary: 'A chat credential for one of your users; replaces the user’s earlier one',
        security: SECRET_KEY_SECURITY,
        body: ChatTokenRequest,
        response: { 200: ChatCredential, ...productResponses },
      },
    },
    async (request) => chat.mintCredential(request.principal!, request.body),
  );

  app.delete(
    '/v1/realtime/chat/tokens/:user_id',
    {
      config: { operation: 'chat.tokens.revoke' },
      schema: {
        tags: ['realtime'],
        summary: 'Revoke a user’s credential: the next login is refused and open sessions are closed',
        security: SECRET_KEY_SECURITY,
        params: ChatUserParams,
        response: { 200: RevokeResponse, 503: ErrorBody, ...ErrorResponses },
      },
    },
    async (request) => chat.revokeCredential(request.principal!, request.params.user_id),
  );

  app.post(
    '/v1/realtime/chat/rooms',
    {
      config: { operation: 'chat.rooms.create' },
      schema: {
        tags: ['realtime'],
        summary: 'The full address of a room, made to exist with the app’s room size and archiving',
        security: SECRET_KEY_SECURITY,
        body: RoomRequest,
        response: { 200: RoomResponse, ...productResponses },
      },
    },
    async (request) => chat.ensureRoom(request.principal!, request.body.room),
  );
};

/** ejabberd's login questions, relayed by the external-auth bridge over the internal network. */
export const chatCallbackRoutes: FastifyPluginAsyncTypebox<{ chat: ChatService }> = async (app, { chat }) => {
  app.post(
    '/internal/ejabberd/auth',
    {
      config: { operation: 'chat.callback.auth' },
      schema: { hide: true, body: AuthCallbackRequest, response: { 200: AuthCallbackResponse } },
    },
    async (request) => ({ ok: await chat.answerAuthCallback(request.body) }),
  );
};
