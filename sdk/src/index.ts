export type {
  Answer,
  Args,
  Caller,
  CallOptions,
  ClientOptions,
  Input,
  ItemOf,
  Output,
  PagedId,
} from './call.js';
export { usdToMicros } from './call.js';
export { type ErrorBody, SvcApiError, SvcTransportError } from './errors.js';
export type { components, operations, paths } from './generated/openapi.js';
export { OPERATIONS, type OperationId } from './generated/operations.js';
export { createServerClient, type ServerClient, type ServerClientOptions } from './server.js';
export { createUserClient, type UserClient, type UserClientOptions } from './user.js';
export {
  createUserTokenVerifier,
  type HeaderBag,
  type ShieldTicket,
  SvcVerificationError,
  type UserTokenClaims,
  verifyShieldTicket,
  verifyWebhook,
  WEBHOOK_TOLERANCE_SECONDS,
  type WebhookEvent,
} from './verify.js';
