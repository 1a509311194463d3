import { Type } from '@sinclair/typebox';
import { ERROR_TYPES, type ErrorType } from './errors.js';

/** A union of string literals that keeps its literal types (a plain map widens them away). */
export function literalUnion<T extends string>(values: readonly T[], options: { description?: string } = {}) {
  return Type.Unsafe<T>(
    Type.Union(
      values.map((value) => Type.Literal(value)),
      options,
    ),
  );
}

/** The spec's error body, shared by every response schema. */
export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      type: literalUnion(Object.keys(ERROR_TYPES) as ErrorType[]),
      message: Type.String(),
      code: Type.Optional(Type.String({ description: 'PAYMENT_REQUIRED on 402' })),
      fields: Type.Optional(
        Type.Array(
          Type.Object({
            in: Type.Union([
              Type.Literal('body'),
              Type.Literal('query'),
              Type.Literal('path'),
              Type.Literal('header'),
            ]),
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

/** The error answers every keyed endpoint can give. */
export const ErrorResponses = {
  401: ErrorBody,
  422: ErrorBody,
  429: ErrorBody,
  500: ErrorBody,
};

/** The two ways to send a secret key, for OpenAPI. */
export const SECRET_KEY_SECURITY: { [scheme: string]: string[] }[] = [
  { bearerKey: [] },
  { apiKeyHeader: [] },
];
