/** The API's error body (the spec's): `{ "error": { type, message, code?, fields? } }`. */
export interface ErrorBody {
  type: string;
  message: string;
  code?: string;
  fields?: { in: string; field: string; message: string }[];
}

/** The API answered with an error: its status, its error body, and what it said about retrying. */
export class SvcApiError extends Error {
  override readonly name = 'SvcApiError';
  constructor(
    readonly operationId: string,
    readonly status: number,
    readonly error: ErrorBody,
    readonly requestId: string | undefined,
    /** Seconds the API asked to wait before trying again (Retry-After), when it said. */
    readonly retryAfterSeconds: number | undefined,
  ) {
    super(`${operationId}: ${status} ${error.type}${error.code ? ` ${error.code}` : ''}: ${error.message}`);
  }

  get type(): string {
    return this.error.type;
  }

  get code(): string | undefined {
    return this.error.code;
  }

  /** 402: the balance cannot pay for the call (top it up). */
  get paymentRequired(): boolean {
    return this.status === 402 || this.error.code === 'PAYMENT_REQUIRED';
  }
}

/** No answer: the request timed out or the connection failed. */
export class SvcTransportError extends Error {
  override readonly name = 'SvcTransportError';
  constructor(
    readonly operationId: string,
    readonly reason: 'timeout' | 'connection',
    options?: { cause?: unknown },
  ) {
    super(`${operationId}: ${reason === 'timeout' ? 'no answer in time' : 'the connection failed'}`, options);
  }
}
