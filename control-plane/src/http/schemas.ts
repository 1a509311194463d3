import { Type } from '@sinclair/typebox';
import { ERROR_TYPES } from './errors.js';

/** The spec's error body, shared by every response schema. */
export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      type: Type.Union(Object.keys(ERROR_TYPES).map((type) => Type.Literal(type))),
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
