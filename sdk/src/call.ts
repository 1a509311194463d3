import { SvcApiError, SvcTransportError } from './errors.js';
import type { operations } from './generated/openapi.js';
import { OPERATIONS, type OperationId } from './generated/operations.js';

type Operation<Id extends OperationId> = operations[Id];
type Field<T, K extends string> = K extends keyof T ? Exclude<T[K], undefined> : never;
type PathOf<Id extends OperationId> = Field<Operation<Id>['parameters'], 'path'>;
type QueryOf<Id extends OperationId> = Field<Operation<Id>['parameters'], 'query'>;
type BodyOf<Id extends OperationId> =
  Operation<Id> extends {
    requestBody?: { content: { 'application/json': infer Body } };
  }
    ? Body
    : never;
type BodyRequired<Id extends OperationId> = Operation<Id> extends { requestBody: unknown } ? true : false;

/** What a call takes: its path parameters, its query and its body, each where the operation has one. */
export type Input<Id extends OperationId> = ([PathOf<Id>] extends [never]
  ? { path?: undefined }
  : { path: PathOf<Id> }) &
  ([QueryOf<Id>] extends [never] ? { query?: undefined } : { query?: QueryOf<Id> }) &
  ([BodyOf<Id>] extends [never]
    ? { body?: undefined }
    : BodyRequired<Id> extends true
      ? { body: BodyOf<Id> }
      : { body?: BodyOf<Id> });

type SuccessStatus = 200 | 201 | 202 | 204;
type Responses<Id extends OperationId> = Operation<Id>['responses'];
/** A JSON answer's type; the bytes of any other (a media file) as a Blob; nothing without a body. */
type BodyTypeOf<Response> = Response extends { content: { 'application/json': infer Json } }
  ? Json
  : Response extends { content: object }
    ? Blob
    : undefined;

/** What a call answers on success. */
export type Output<Id extends OperationId> = BodyTypeOf<
  Responses<Id>[Extract<keyof Responses<Id>, SuccessStatus>]
>;

export interface CallOptions {
  /** Sent as Idempotency-Key; a POST that takes one gets a fresh one when not given, kept across retries. */
  idempotencyKey?: string;
  /** Per attempt (default: the client's). */
  timeoutMs?: number;
  /** Attempts after the first on a failure that is safe to retry (default: the client's). */
  retries?: number;
  signal?: AbortSignal;
}

/** A call's arguments: the input may be left out when nothing in it is required. */
export type Args<Id extends OperationId> =
  Partial<Input<Id>> extends Input<Id>
    ? [input?: Input<Id>, options?: CallOptions]
    : [input: Input<Id>, options?: CallOptions];

/** A successful answer, with what the call cost (X-Svc-Cost-Usd) and whether it was a replay. */
export interface Answer<T> {
  data: T;
  status: number;
  /** The cost in US dollars as the API states it, e.g. "0.000500". */
  costUsd: string;
  /** The same in micro-dollars (integer). */
  costMicros: number;
  requestId: string | undefined;
  /** The API replayed the first answer to this Idempotency-Key. */
  replayed: boolean;
}

export type Caller = <Id extends OperationId>(id: Id, ...args: Args<Id>) => Promise<Answer<Output<Id>>>;

export interface ClientOptions {
  /** The API's base URL, e.g. https://api.example.com. */
  baseUrl: string;
  /** Per attempt; 30 s unless given. */
  timeoutMs?: number;
  /** Attempts after the first on a failure that is safe to retry; 2 unless given. */
  retries?: number;
  /** A fetch of your own (instrumented, or a proxy agent's). */
  fetch?: typeof fetch;
}

const DEFAULT_TIMEOUT_MS = 30_000;
const DEFAULT_RETRIES = 2;
/** Waits between attempts when the API does not say: doubling from this, with jitter. */
const BACKOFF_BASE_MS = 250;
/** At most this long, whatever Retry-After says. */
const BACKOFF_CAP_MS = 10_000;

/** "0.000500" → 500 micro-dollars, without floating point. */
export function usdToMicros(usd: string): number {
  const [whole = '0', fraction = ''] = usd.split('.');
  return Number(whole) * 1_000_000 + Number(fraction.padEnd(6, '0').slice(0, 6));
}

function urlOf(baseUrl: string, path: string, input: { path?: object; query?: object }): string {
  const filled = path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = (input.path as Record<string, unknown> | undefined)?.[name];
    if (value === undefined) throw new TypeError(`missing path parameter ${name}`);
    return encodeURIComponent(String(value));
  });
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(input.query ?? {}))
    if (value !== undefined) query.set(name, String(value));
  const search = query.size > 0 ? `?${query}` : '';
  return `${baseUrl.replace(/\/+$/, '')}${filled}${search}`;
}

/**
 * Whether a failed attempt may be sent again: a 503 or 429 was refused before anything ran (the API
 * keeps nothing of it), a 409 on a held Idempotency-Key clears when its first run ends, and an attempt
 * that got no answer only when it can do no harm twice (GET, PUT, DELETE, or a POST with its key).
 */
function retryable(failure: unknown, method: string, keyed: boolean): boolean {
  if (failure instanceof SvcTransportError) return keyed || (method !== 'POST' && method !== 'PATCH');
  if (!(failure instanceof SvcApiError)) return false;
  if (failure.status === 503 || failure.status === 429) return true;
  return failure.status === 409 && failure.code === 'IDEMPOTENCY_KEY_IN_USE';
}

function backoffMs(failure: unknown, attempt: number): number {
  const told = failure instanceof SvcApiError ? failure.retryAfterSeconds : undefined;
  const wait = told !== undefined ? told * 1000 : BACKOFF_BASE_MS * 2 ** attempt * (0.5 + Math.random());
  return Math.min(wait, BACKOFF_CAP_MS);
}

/**
 * The one request path of every client: URL and body from the operation table, the credential's
 * header, a timeout per attempt, retries of safe failures with the same Idempotency-Key, typed errors.
 */
export function createCaller(options: ClientOptions, headers: () => Record<string, string>): Caller {
  const doFetch = options.fetch ?? globalThis.fetch;
  return (async (id: OperationId, input: Input<OperationId> = {} as never, call: CallOptions = {}) => {
    const { method, path, idempotencyKey } = OPERATIONS[id];
    const url = urlOf(options.baseUrl, path, input);
    const key = idempotencyKey ? (call.idempotencyKey ?? crypto.randomUUID()) : undefined;
    const body = (input as { body?: unknown }).body;
    const retries = call.retries ?? options.retries ?? DEFAULT_RETRIES;
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await attemptOnce();
      } catch (failure) {
        if (attempt >= retries || call.signal?.aborted || !retryable(failure, method, key !== undefined))
          throw failure;
        await new Promise((resolve) => setTimeout(resolve, backoffMs(failure, attempt)));
      }
    }

    async function attemptOnce(): Promise<Answer<unknown>> {
      const timeout = AbortSignal.timeout(call.timeoutMs ?? options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
      let response: Response;
      try {
        response = await doFetch(url, {
          method,
          headers: {
            accept: 'application/json',
            ...headers(),
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            ...(key === undefined ? {} : { 'idempotency-key': key }),
          },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: call.signal ? AbortSignal.any([call.signal, timeout]) : timeout,
        });
      } catch (error) {
        if (call.signal?.aborted) throw error;
        throw new SvcTransportError(id, timeout.aborted ? 'timeout' : 'connection', { cause: error });
      }
      const answer = await bodyOf(response);
      const requestId = response.headers.get('x-request-id') ?? undefined;
      if (!response.ok) {
        const retryAfter = response.headers.get('retry-after');
        const error = (answer as { error?: SvcApiError['error'] } | undefined)?.error ?? {
          type: 'unknown',
          message: (typeof answer === 'string' ? answer.slice(0, 200) : '') || response.statusText,
        };
        throw new SvcApiError(
          id,
          response.status,
          error,
          requestId,
          retryAfter ? Number(retryAfter) : undefined,
        );
      }
      const costUsd = response.headers.get('x-svc-cost-usd') ?? '0.000000';
      return {
        data: answer,
        status: response.status,
        costUsd,
        costMicros: usdToMicros(costUsd),
        requestId,
        replayed: response.headers.get('idempotent-replayed') === 'true',
      };
    }
  }) as Caller;
}

/** The answer's body: parsed JSON, a Blob of other bytes, or the text of a non-JSON error. */
async function bodyOf(response: Response): Promise<unknown> {
  const type = response.headers.get('content-type') ?? '';
  if (/[/+]json\b/.test(type)) {
    const text = await response.text();
    return text === '' ? undefined : JSON.parse(text);
  }
  if (!response.ok) return response.text();
  const bytes = await response.blob();
  return bytes.size === 0 && type === '' ? undefined : bytes;
}

/** Operations whose answer is a cursor page: `{ items, next_cursor }`. */
export type PagedId = {
  [Id in OperationId]: Output<Id> extends { items: unknown[]; next_cursor: string | null } ? Id : never;
}[OperationId];
export type ItemOf<Id extends PagedId> = Output<Id> extends { items: (infer Item)[] } ? Item : never;

/** Every item of a list, page after page, following next_cursor until it is null. */
export function paginator(call: Caller) {
  return async function* paginate<Id extends PagedId>(
    id: Id,
    ...[input, callOptions]: Args<Id>
  ): AsyncGenerator<ItemOf<Id>> {
    let cursor: string | undefined;
    do {
      const query = {
        ...((input as { query?: object } | undefined)?.query ?? {}),
        ...(cursor ? { cursor } : {}),
      };
      const args = [{ ...(input ?? {}), query } as Input<Id>, callOptions as CallOptions] as Args<Id>;
      const page = (await call(id, ...args)).data as { items: ItemOf<Id>[]; next_cursor: string | null };
      yield* page.items;
      cursor = page.next_cursor ?? undefined;
    } while (cursor !== undefined);
  };
}
