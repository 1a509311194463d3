import { type TProperties, type TSchema, Type } from '@sinclair/typebox';
import { ERROR_TYPES, type ErrorStatus, type ErrorType } from './errors.js';

/** A union of string literals that keeps its literal types (a plain map widens them away). */
export function literalUnion<T extends string>(values: readonly T[], options: { description?: string } = {}) {
  return Type.Unsafe<T>(
    Type.Union(
      values.map((value) => Type.Literal(value)),
      options,
    ),
  );
}

/** The spec's error body, shared by every error response. */
export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      type: literalUnion(Object.keys(ERROR_TYPES) as ErrorType[]),
      message: Type.String(),
      code: Type.Optional(
        Type.String({ description: 'A stable code where there is one: PAYMENT_REQUIRED on 402, …' }),
      ),
      fields: Type.Optional(
        Type.Array(
          Type.Object({
            in: literalUnion(['body', 'query', 'path', 'header'] as const),
            field: Type.String(),
            message: Type.String(),
          }),
          { description: 'On 422: every failing field' },
        ),
      ),
    }),
  },
  { description: 'The error body of every failure' },
);

/** What each error status means, for the OpenAPI document. */
const ERROR_MEANINGS: Record<ErrorStatus, string> = {
  401: 'Missing or invalid credentials',
  402: 'PAYMENT_REQUIRED: the live balance cannot pay, or the plan does not include this operation',
  403: 'The app forbids this (a product switched off, a quota reached)',
  404: 'No such resource for this app and key mode',
  405: 'The path does not take this method (Allow lists those it takes)',
  409: 'The resource is not in a state that allows this',
  410: 'The operation is gone; the message names what to use instead',
  422: 'Validation failed: every failing field is listed',
  429: 'A rate limit, the daily cap or the invalid-key lockout',
  500: 'Server error (quote the request id)',
  503: 'A bundled server or provider is unavailable',
};

/**
 * The error responses of an operation, each with the error body. `alsoMeaning`: what statuses mean
 * when the pipeline answers them besides the operation (added to a status the operation has too).
 */
export function errorResponses(
  statuses: Iterable<ErrorStatus>,
  alsoMeaning: Partial<Record<ErrorStatus, string>> = {},
): Record<number, TSchema> {
  const meanings = new Map<number, string[]>();
  for (const status of statuses) meanings.set(status, [ERROR_MEANINGS[status]]);
  for (const [status, meaning] of Object.entries(alsoMeaning))
    meanings.set(Number(status), [...(meanings.get(Number(status)) ?? []), meaning]);
  return Object.fromEntries(
    [...meanings]
      .sort(([a], [b]) => a - b)
      .map(([status, texts]) => [status, { ...ErrorBody, description: texts.join('; or ') }]),
  );
}

/**
 * A success answer's schema as fastify and the OpenAPI document take it: as is for JSON, or under
 * `mediaType` for other bytes (fastify serializes neither a stream nor a buffer).
 */
export function answerSchema(schema: TSchema, mediaType?: string): TSchema | object {
  if (mediaType === undefined) return schema;
  return { description: schema.description, content: { [mediaType]: { schema } } };
}

/** Spec: "limit max 100 on lists" (the storage list, 1-200, is its one exception). */
const LIST_LIMIT_MAX = 100;

/** A page size: 1 to `max`, `fallback` when not given. */
export const Limit = (max: number, fallback: number, description = 'Page size') =>
  Type.Integer({ minimum: 1, maximum: max, default: fallback, description });
export const Cursor = Type.String({
  minLength: 1,
  maxLength: 200,
  description: 'next_cursor of the previous page',
});
/** The query of a list with nothing to filter: a page size and the previous page's cursor. */
export const PageQueryOf = (max: number, fallback: number) =>
  Type.Object(
    { limit: Limit(max, fallback), cursor: Type.Optional(Cursor) },
    { additionalProperties: false },
  );
/** A list's page size and its query, at the spec's largest page. */
export const ListLimit = (fallback: number, description?: string) =>
  Limit(LIST_LIMIT_MAX, fallback, description);
export const ListPageQuery = (fallback: number) => PageQueryOf(LIST_LIMIT_MAX, fallback);

/** A cursor page: the spec's `{items, next_cursor}`. */
export function Page<T extends TSchema>(item: T, description?: string) {
  return Type.Object(
    {
      items: Type.Array(item, description ? { description } : {}),
      next_cursor: Type.Union([Type.String(), Type.Null()], {
        description: 'Pass as `cursor` for the next page; null on the last page',
      }),
    },
    { additionalProperties: false },
  );
}

/**
 * What every DELETE answers: the spec's delete shape `{ok: true, id}` (id: what was deleted, as the
 * path named it), then any fields of the operation's own.
 */
export function Deleted<T extends TProperties>(fields: T = {} as T, description?: string) {
  return Type.Object(
    {
      ok: Type.Literal(true),
      id: Type.String({ description: 'What was deleted, as the path named it' }),
      ...fields,
    },
    { additionalProperties: false, ...(description ? { description } : {}) },
  );
}
