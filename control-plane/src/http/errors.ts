/**
 * The one catalogue of API errors. Every error body is `{"error":{"type","message"}}`, plus `code`
 * where the spec names one (PAYMENT_REQUIRED) and `fields` on validation failures.
 */
export const ERROR_TYPES = {
  invalid_request: 422,
  authentication_error: 401,
  payment_required: 402,
  permission_error: 403,
  not_found: 404,
  conflict: 409,
  rate_limited: 429,
  api_error: 500,
  service_unavailable: 503,
} as const;

export type ErrorType = keyof typeof ERROR_TYPES;

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

export class ApiError extends Error {
  readonly status: number;

  constructor(
    readonly type: ErrorType,
    message: string,
    readonly extra: {
      status?: number;
      code?: string;
      fields?: FieldError[];
      headers?: Record<string, string>;
    } = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = extra.status ?? ERROR_TYPES[type];
  }

  toBody(): ErrorBody {
    const { code, fields } = this.extra;
    return {
      error: {
        type: this.type,
        message: this.message,
        ...(code ? { code } : {}),
        ...(fields ? { fields } : {}),
      },
    };
  }
}

export const errors = {
  validation: (fields: FieldError[]) =>
    new ApiError(
      'invalid_request',
      `Invalid request: ${fields.map((f) => `${f.field} ${f.message}`).join('; ')}`,
      {
        fields,
      },
    ),
  notFound: (what: string) => new ApiError('not_found', `${what} not found`),
  missingKey: () =>
    new ApiError(
      'authentication_error',
      'No API key: send it as "Authorization: Bearer <key>" or "X-API-Key: <key>"',
    ),
  invalidKey: (reason: string) => new ApiError('authentication_error', `Invalid API key: ${reason}`),
  lockedOut: (retryAfterSeconds: number) =>
    new ApiError('rate_limited', 'Too many invalid API keys from this address; try again later', {
      headers: { 'retry-after': String(retryAfterSeconds) },
    }),
  dailyCapReached: (cap: number, retryAfterSeconds: number) =>
    new ApiError('rate_limited', `Daily request cap of ${cap} reached for this key; it resets at 00:00 UTC`, {
      headers: { 'retry-after': String(retryAfterSeconds) },
    }),
  paymentRequired: (message: string) =>
    new ApiError('payment_required', message, { code: 'PAYMENT_REQUIRED' }),
  internal: (requestId: string) =>
    new ApiError('api_error', `Internal server error; quote request id ${requestId} when reporting it`),
};
