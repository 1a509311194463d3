import type { Static, TSchema } from '@sinclair/typebox';
import type { AdmissionScript, UserLimit } from './admission.js';
import type { Principal, UserPrincipal } from './caller.js';
import type { ErrorStatus } from './errors.js';
import type { Transaction } from './transaction.js';

/**
 * How an operation's caller proves who it is:
 * - `secret-key`: an app's server, with svc_live_… or svc_test_… (lockout, daily cap, balance);
 * - `publishable-key`: a client, with pk_… in X-Publishable-Key (the same pipeline, CORS open);
 * - `user-token`: an app's user, with a user token the app's server minted (/v1/me/…; the minting
 *   key's daily cap and balance);
 * - `internal`: a bundled server's callback, with the internal secret;
 * - `signed`: a callback that carries its own signature, verified by the handler (LiveKit);
 * - `public`: nobody in particular (health, metrics, the OpenAPI document).
 */
export type AuthKind = 'secret-key' | 'publishable-key' | 'user-token' | 'internal' | 'signed' | 'public';
/** The auth kinds admitted against an app's key: lockout, daily cap, balance. */
export type KeyAuth = 'secret-key' | 'publishable-key' | 'user-token';

/** The bundled servers that call `internal` operations, each with a bearer secret of its own. */
export type InternalCaller = 'ejabberd' | 'minio';

/**
 * Where an operation is served: the public listener (clients, apps' servers, health, the OpenAPI
 * document) or the internal one (the bundled servers' callbacks, metrics), which is never published.
 */
export type Listener = 'public' | 'internal';

/** The usage a priced operation records each time it succeeds, in the metric's base unit. */
export interface Price {
  product: string;
  metric: string;
  /** Base units per call (default 1). */
  quantity?: number;
}

/** Lets a handler set what the declaration cannot: a status among its declared ones, a header. */
export interface ReplyControl {
  status(code: number): void;
  header(name: string, value: string): void;
}

export interface Logger {
  info(object: object, message?: string): void;
  warn(object: object, message?: string): void;
  error(object: object, message?: string): void;
}

export interface Call<P, Q, B, A extends AuthKind> {
  params: P;
  query: Q;
  body: B;
  /** The key's app and mode, on keyed operations; and the user, on user-token ones. */
  caller: A extends 'user-token' ? UserPrincipal : A extends KeyAuth ? Principal : null;
  client: { address: string; userAgent: string };
  /** Aborted when the client goes before its answer is sent. */
  signal: AbortSignal;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  reply: ReplyControl;
  log: Logger;
  /**
   * On operations declared with `admission: 'in-handler'`: admits the request (lockout, daily cap,
   * balance) and runs the operation's own Redis script in the same round trip, only if admitted.
   */
  admit<T = unknown>(script: AdmissionScript, keys: string[], args: (string | number)[]): Promise<T>;
}

/** What a priced operation's handler gets besides the call: the transaction its charge joins. */
export interface PricedCall {
  tx: Transaction;
}

type In<S> = S extends TSchema ? Static<S> : undefined;

export interface RouteDeclaration<
  P extends TSchema | undefined,
  Q extends TSchema | undefined,
  B extends TSchema | undefined,
  R extends TSchema,
  A extends AuthKind,
  Priced extends Price | undefined,
> {
  /** Dotted and stable (`storage.uploads.create`): the OpenAPI operationId, a metric label, a log field. */
  operationId: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  auth: A;
  tags: string[];
  summary: string;
  description?: string;
  params?: P;
  query?: Q;
  body?: B;
  response: R;
  /** The success status (default 200). */
  status?: 200 | 201;
  /**
   * On a create: the answer's field that the item's own operations take as their path parameter
   * (default `id`), for the OpenAPI links from it to them.
   */
  itemId?: string;
  /** Other answers that carry a body of their own rather than the error body (readiness's 503). */
  otherResponses?: Record<number, TSchema>;
  /**
   * The media type of the success answers when they are not JSON (a file's bytes): the OpenAPI
   * document then describes them under it, so that clients do not parse them as JSON.
   */
  produces?: string;
  /** Error statuses beyond those of the auth kind (401, 422, 429, 500 for keyed operations). */
  errors?: readonly ErrorStatus[];
  /**
   * The usage a call records. The pipeline opens a transaction, hands it to the handler, charges the
   * usage in it once the handler succeeds and reports the charge in X-Svc-Cost-Usd.
   */
  price?: Priced;
  /**
   * Live calls of this operation that come while its turns run share the next one's transaction and
   * one charge per payer (Metering.charge's `together`): a burst costs PostgreSQL a commit, and each
   * account's balance row a locked update, per turn instead of per call. Only for work that is plain writes
   * safe to run again: the works of a turn interleave on one connection (a lock or an advisory lock
   * taken by one is held by all), and when one of them fails, every call of the turn runs again alone.
   */
  chargedTogether?: true;
  /**
   * With `chargedTogether`: the work's first statement locks a row of its caller's (a user's profile).
   * A turn then starts its works in their callers' order (`callerOrder`), the order in which every
   * writer of several such rows locks them, so that a turn and another writer cannot deadlock.
   */
  locksCallerFirst?: true;
  /**
   * The work cannot be taken back once done (a message handed to the chat server, a room changed):
   * it is charged in full even past what the balance covers (Metering.charge's `inFull`). An empty
   * live balance is still refused (402) before the handler runs.
   */
  irreversible?: true;
  /**
   * A response field that repeats X-Svc-Cost-Usd: `cost_usd` as a number of dollars, `cost_milli` as
   * thousandths of a dollar (the spec's names).
   */
  costField?: 'cost_usd' | 'cost_milli';
  /** Live keys need a balance above zero (402 otherwise), as priced operations always do: mints. */
  needsBalance?: boolean;
  /** The Free plan is refused (402). */
  paidPlan?: boolean;
  /** On `user-token` operations: the user's cap, counted in the admission's round trip (429 past it). */
  perUser?: UserLimit;
  /** `in-handler`: the handler admits the request itself, with its own Redis writes (`call.admit`). */
  admission?: 'before' | 'in-handler';
  /** On `internal` operations: the bundled server that calls it, whose own secret it takes. */
  internalCaller?: InternalCaller;
  /** Default: `internal` for the callbacks (`internal` and `signed` auth), else `public`. */
  listener?: Listener;
  /** Bodies of this media type reach the handler as the exact string sent (signed callbacks). */
  rawBody?: string;
  /** Left out of the OpenAPI document (internal callbacks). */
  hidden?: boolean;
  /**
   * false: no HEAD beside the GET. fastify answers HEAD by running the GET and dropping its body,
   * which for a stream means reading (and metering) every byte nobody receives.
   */
  head?: false;
  /**
   * The least level logged for this operation's requests (default: the service's). A callback made
   * for every chat login logs its failures only, not two lines per login.
   */
  logLevel?: 'warn' | 'error';
  handler(
    call: Call<In<P>, In<Q>, In<B>, A> & (Priced extends Price ? PricedCall : unknown),
  ): Promise<Static<R>>;
}

// biome-ignore lint/suspicious/noExplicitAny: a list of routes holds every combination of schemas.
export type Route = RouteDeclaration<any, any, any, any, AuthKind, any>;

export const listenerOf = (declared: Route): Listener =>
  declared.listener ?? (declared.auth === 'internal' || declared.auth === 'signed' ? 'internal' : 'public');

/** Declares an operation once: the HTTP layer derives the fastify route, OpenAPI, metrics and logs. */
export function route<
  P extends TSchema | undefined = undefined,
  Q extends TSchema | undefined = undefined,
  B extends TSchema | undefined = undefined,
  R extends TSchema = TSchema,
  A extends AuthKind = AuthKind,
  Priced extends Price | undefined = undefined,
>(declaration: RouteDeclaration<P, Q, B, R, A, Priced>): Route {
  return declaration as Route;
}
