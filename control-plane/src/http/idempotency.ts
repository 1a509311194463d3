import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorStatus } from '../platform/errors.js';
import type { HeldKey, Idempotency, KeptAnswer } from '../platform/idempotency.js';
import { inCodeUnitOrder } from '../platform/ordering.js';
import type { Route } from '../platform/route.js';
import { sha256 } from '../platform/secrets.js';
import type { Db } from '../platform/transaction.js';
import { toServiceError } from './error-handler.js';

const KEY_HEADER = 'idempotency-key';
/** Marks an answer given from the kept one (Stripe's name). */
const REPLAYED_HEADER = 'idempotent-replayed';
const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Every POST of a secret key or a user token takes an Idempotency-Key. Publishable keys are public
 * and shared by every browser of an app: a key scoped to one would let one client replay another's
 * answer. A user's keys are the user's own (see `idempotencyKeyOf`).
 */
export const takesIdempotencyKey = (declared: Route) =>
  declared.method === 'POST' && (declared.auth === 'secret-key' || declared.auth === 'user-token');

/**
 * Marks a key as a user's: the header takes printable ASCII only, so no key the app's server sends
 * can hold it, and the key after the last mark is the header's, whatever the user id holds.
 */
const USER_KEY_MARK = '\u00b7';

/** The header as the OpenAPI document declares it and validation checks it. */
export const IdempotencyKeyHeader = Type.Object({
  [KEY_HEADER]: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x20-\\x7E]+$',
      description:
        'A value unique to this request (a UUID), up to 255 printable ASCII characters. Sent again ' +
        'with the same request within 24 hours, it answers what the first answered (status, body, ' +
        'X-Svc-Cost-Usd, and `Idempotent-Replayed: true`) and does and charges nothing again.',
    }),
  ),
});

/** What the pipeline's own answers of an idempotent operation mean, for its OpenAPI responses. */
export const IDEMPOTENCY_MEANINGS: Partial<Record<ErrorStatus, string>> = {
  409: 'IDEMPOTENCY_KEY_IN_USE: a request with the same Idempotency-Key is in progress; retry shortly',
  422: 'IDEMPOTENCY_KEY_REUSED: the Idempotency-Key was used for another request within 24 hours',
};

/**
 * Errors kept for replay like successes: those the same request gets again whatever happens meanwhile
 * (nothing by that id, an invalid request). Not kept, so that the key runs again: answers the caller
 * can change (402 by a top-up, 403 by a setting, 409 by the state of a resource), limits (429) and
 * failures (5xx).
 */
const KEPT_ERRORS: ReadonlySet<number> = new Set([404, 422]);

/**
 * The request's key, on operations that take one (already checked against IdempotencyKeyHeader),
 * scoped to the user on a user's request: two users of an app never share a key's answer.
 */
export function idempotencyKeyOf(request: FastifyRequest): string | undefined {
  const key = request.headers[KEY_HEADER];
  if (typeof key !== 'string') return undefined;
  const principal = request.principal;
  return principal && 'userId' in principal
    ? `${USER_KEY_MARK}${principal.userId}${USER_KEY_MARK}${key}`
    : key;
}

/** JSON with every object's keys sorted: one request written in another order has the same text. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => inCodeUnitOrder(a, b));
    return `{${entries.map(([name, item]) => `${JSON.stringify(name)}:${canonicalJson(item)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** A payload as fastify will send it at the reply's status: JSON through that status's schema. */
const asSent = (reply: FastifyReply, payload: unknown) => reply.serialize(payload) as string;

/** What makes two requests with one key the same: the method, the route, params, query and body. */
function fingerprintOf(declared: Route, request: FastifyRequest): string {
  const parts = [declared.method, declared.url, request.params, request.query, request.body];
  return sha256(canonicalJson(parts)).toString('hex');
}

export interface AnswerOnceOptions {
  declared: Route;
  request: FastifyRequest;
  reply: FastifyReply;
  idempotency: Idempotency;
  key: string;
  /** Headers the handler set itself, kept with its answer. */
  handlerHeaders: Readonly<Record<string, string>>;
  /** Admits the request without the operation's own script (operations that admit in their handler). */
  admit(): Promise<unknown>;
  /**
   * Runs the operation and hands its result to `keep`, in the transaction of its charge when it is
   * priced; answers what `keep` answers (the body as sent).
   */
  run(held: HeldKey, keep: (result: unknown, db?: Db) => Promise<string>): Promise<unknown>;
}

/**
 * Runs an operation once per Idempotency-Key of the caller's app and key mode: a request repeated
 * within 24 hours gets the first answer (422 if it is another request, 409 while the first runs).
 * Every answer is admitted (lockout, daily cap, balance) like any request.
 */
export async function answerOnce(options: AnswerOnceOptions): Promise<unknown> {
  const { request, reply, idempotency } = options;
  const admitted = async () => {
    if (!request.admitted) await options.admit();
  };
  const claimed = await idempotency
    .claim(
      request.principal!,
      options.key,
      fingerprintOf(options.declared, request),
      // A priced call whose work is all in its transaction; not one that sends before it commits.
      options.declared.price !== undefined && options.declared.irreversible !== true,
    )
    .catch(async (error: unknown) => {
      await admitted();
      throw error;
    });
  if ('replay' in claimed) {
    await admitted();
    return replay(request, reply, claimed.replay);
  }
  const { held } = claimed;
  try {
    const body = await options.run(held, async (result, db) => {
      const text = asSent(reply, result);
      await idempotency.keep(
        held,
        { status: reply.statusCode, body: text, headers: options.handlerHeaders },
        db,
      );
      return text;
    });
    reply.type(JSON_TYPE);
    return body;
  } catch (error) {
    await settleFailure(options, held, error as Error);
    throw error;
  }
}

/** The kept answer, with the cost the first request was charged (it is not charged again). */
function replay(request: FastifyRequest, reply: FastifyReply, kept: KeptAnswer): string {
  request.costMicros = kept.costMicros;
  reply
    .code(kept.status)
    .headers({ ...kept.headers, [REPLAYED_HEADER]: 'true' })
    .type(JSON_TYPE);
  return kept.body;
}

/** A failed request keeps its error as the key's answer, or gives the key up for another try. */
async function settleFailure(options: AnswerOnceOptions, held: HeldKey, error: Error): Promise<void> {
  const { request, reply, idempotency } = options;
  const rendered = toServiceError(error, request.id);
  try {
    if (KEPT_ERRORS.has(rendered.status)) {
      // Serialized as the error handler will send it: the schema of the error's status.
      reply.code(rendered.status);
      const body = asSent(reply, rendered.toBody());
      await idempotency.keep(held, { status: rendered.status, body, headers: rendered.headers });
    } else {
      await idempotency.release(held);
    }
  } catch (settling) {
    // The request's own error stays its answer; an unsettled key lapses after IDEMPOTENCY_LOCK_MS.
    request.log.warn({ err: settling }, 'idempotency key not settled after a failed request');
  }
}
