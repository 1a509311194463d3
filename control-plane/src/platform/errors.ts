/**
 * The one catalogue of API errors. Every layer throws a ServiceError (or a subclass) carrying its own
 * type, status and code; the HTTP layer's one handler renders any of them without knowing who threw
 * it. Every error body is `{"error":{"type","message"}}`, plus `code` where there is one
 * (PAYMENT_REQUIRED, QUOTA_EXCEEDED…) and `fields` on validation failures.
 *
 * This file imports nothing, so every layer (adapters included) may use it.
 */
export const ERROR_TYPES = {
  invalid_request: 422,
  authentication_error: 401,
  payment_required: 402,
  permission_error: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  gone: 410,
  rate_limited: 429,
  api_error: 500,
  service_unavailable: 503,
} as const;

export type ErrorType = keyof typeof ERROR_TYPES;

/** The statuses an operation may declare besides its successes. */
export type ErrorStatus = (typeof ERROR_TYPES)[ErrorType];

export interface FieldError {
  /** Where the field was sent: body, query, path or header. */
  in: 'body' | 'query' | 'path' | 'header';
  /** The field's name, dotted for nested ones (`metadata.color`, `messages.0.role`). */
  field: string;
  message: string;
}

export interface ErrorBody {
  error: {
    type: ErrorType;
    message: string;
    code?: string;
    fields?: FieldError[];
  };
}

export interface ServiceErrorOptions {
  status?: number;
  code?: string;
  fields?: FieldError[];
  headers?: Record<string, string>;
  /** What went wrong in detail, for the log only (never sent to the caller). */
  detail?: string;
}

export class ServiceError extends Error {
  readonly status: number;
  readonly code: string | undefined;
  readonly fields: FieldError[] | undefined;
  readonly headers: Record<string, string>;
  readonly detail: string | undefined;

  constructor(
    readonly type: ErrorType,
    message: string,
    options: ServiceErrorOptions = {},
  ) {
    super(message);
    this.name = 'ServiceError';
    this.status = options.status ?? ERROR_TYPES[type];
    this.code = options.code;
    this.fields = options.fields;
    this.headers = options.headers ?? {};
    this.detail = options.detail;
  }

  toBody(): ErrorBody {
    return {
      error: {
        type: this.type,
        message: this.message,
        ...(this.code ? { code: this.code } : {}),
        ...(this.fields ? { fields: this.fields } : {}),
      },
    };
  }
}

/** A live balance that cannot pay: 402 PAYMENT_REQUIRED, before any work is kept. */
export class PaymentRequiredError extends ServiceError {
  constructor(message: string) {
    super('payment_required', message, { code: 'PAYMENT_REQUIRED' });
    this.name = 'PaymentRequiredError';
  }
}

/** A bundled server (ejabberd, LiveKit, MinIO) did not answer as expected: 503, details logged only. */
export class UpstreamError extends ServiceError {
  constructor(
    readonly server: string,
    detail: string,
  ) {
    super('service_unavailable', `The ${server} server did not answer as expected; try again shortly`, {
      detail,
    });
    this.name = 'UpstreamError';
  }
}

/** Failing fields a 422 names at most: enough for any form, and a bounded answer to a flood of them. */
export const FIELDS_NAMED = 100;

export const errors = {
  /** A 422 naming the failing fields: the first FIELDS_NAMED of them, and how many more there were. */
  validation: (failing: FieldError[]) => {
    const fields = failing.slice(0, FIELDS_NAMED);
    const more = failing.length - fields.length;
    return new ServiceError(
      'invalid_request',
      `Invalid request: ${fields.map((f) => `${f.field} ${f.message}`).join('; ')}${more > 0 ? `; and ${more} more` : ''}`,
      { fields },
    );
  },
  /** One invalid field, where the schema alone cannot tell (a cursor this API never gave out). */
  invalidField: (place: FieldError['in'], field: string, message: string) =>
    errors.validation([{ in: place, field, message }]),
  notFound: (what: string) => new ServiceError('not_found', `${what} not found`),
  /** A path the API has, asked with a method it does not take there. */
  methodNotAllowed: (method: string, path: string, allowed: readonly string[]) =>
    new ServiceError('method_not_allowed', `${path} does not take ${method}: use ${allowed.join(' or ')}`, {
      headers: { allow: allowed.join(', ') },
    }),
  conflict: (message: string, code?: string) => new ServiceError('conflict', message, code ? { code } : {}),
  /** An operation that no longer exists; the message names what to use instead. */
  gone: (message: string, code: string) => new ServiceError('gone', message, { code }),
  forbidden: (message: string, code?: string) =>
    new ServiceError('permission_error', message, code ? { code } : {}),
  missingKey: () =>
    new ServiceError(
      'authentication_error',
      'No API key: send it as "Authorization: Bearer <key>" or "X-API-Key: <key>"',
    ),
  invalidKey: (reason: string) => new ServiceError('authentication_error', `Invalid API key: ${reason}`),
  unauthenticated: (message: string, options: ServiceErrorOptions = {}) =>
    new ServiceError('authentication_error', message, options),
  rateLimited: (message: string, retryAfterSeconds: number) =>
    new ServiceError('rate_limited', message, { headers: { 'retry-after': String(retryAfterSeconds) } }),
  lockedOut: (retryAfterSeconds: number) =>
    errors.rateLimited('Too many invalid API keys from this address; try again later', retryAfterSeconds),
  dailyCapReached: (cap: number, retryAfterSeconds: number) =>
    errors.rateLimited(
      `Daily request cap of ${cap} reached for this key; it resets at 00:00 UTC`,
      retryAfterSeconds,
    ),
  paymentRequired: (message: string) => new PaymentRequiredError(message),
  idempotencyKeyReused: () =>
    new ServiceError(
      'invalid_request',
      'This Idempotency-Key was used for another request (method, path or body) within 24 hours: send a new key with a new request',
      {
        code: 'IDEMPOTENCY_KEY_REUSED',
        fields: [{ in: 'header', field: 'idempotency-key', message: 'was used for another request' }],
      },
    ),
  /** Retryable: the first request with the key is still running; once it answers, a retry gets its answer. */
  idempotencyKeyInUse: () =>
    new ServiceError(
      'conflict',
      'A request with this Idempotency-Key is in progress; retry shortly to get its answer',
      { code: 'IDEMPOTENCY_KEY_IN_USE', headers: { 'retry-after': '1' } },
    ),
  internal: (requestId: string) =>
    new ServiceError('api_error', `Internal server error; quote request id ${requestId} when reporting it`),
};
