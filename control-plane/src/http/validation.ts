import AjvCompiler from '@fastify/ajv-compiler';
import type { Static, TSchema } from '@sinclair/typebox';
import type { FastifyInstance, FastifySchema, FastifySchemaValidationError } from 'fastify';
import { errors } from '../platform/errors.js';
import { TEXT_FORMATS } from '../platform/identities.js';
import { fieldOf } from './error-handler.js';

/** The platform's own string formats (app ids, display names), beside ajv-formats' standard ones. */
const FORMATS = Object.fromEntries(
  Object.entries(TEXT_FORMATS).map(([name, format]) => [
    name,
    { type: 'string' as const, validate: format.validate },
  ]),
);

const COMMON = { allErrors: true, removeAdditional: false, useDefaults: true, formats: FORMATS } as const;

/** Digits only, as a person writes a number: no exponent, hex, blanks or leading zeros. */
const WRITTEN = {
  integer: /^-?(0|[1-9][0-9]*)$/,
  number: /^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/,
} as const;

type Validate = ((data: unknown) => boolean) & { errors?: FastifySchemaValidationError[] | null };

/** The numeric properties of an object schema, by the type they must parse to. */
function numericProperties(schema: FastifySchema | undefined): [string, keyof typeof WRITTEN][] {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> } | undefined)?.properties;
  return Object.entries(properties ?? {}).flatMap(([name, property]) =>
    property.type === 'integer' || property.type === 'number' ? [[name, property.type] as const] : [],
  );
}

/**
 * A query string or path parameter must write its number in digits: Ajv's coercion would take
 * `1e1`, `0x10` or ` 10` for 10. Checked before Ajv coerces, on the strings as they were sent.
 */
function strictNumbers(schema: FastifySchema | undefined, validate: Validate): Validate {
  const numeric = numericProperties(schema);
  if (numeric.length === 0) return validate;
  const checked: Validate = (data) => {
    const values = (data ?? {}) as Record<string, unknown>;
    const issues: FastifySchemaValidationError[] = numeric
      .filter(
        ([name, type]) => typeof values[name] === 'string' && !WRITTEN[type].test(values[name] as string),
      )
      .map(([name, type]) => ({
        instancePath: `/${name}`,
        schemaPath: `#/properties/${name}/type`,
        keyword: 'type',
        params: { type },
        message: type === 'integer' ? 'must be a whole number in digits' : 'must be a number in digits',
      }));
    if (issues.length > 0) {
      checked.errors = issues;
      return false;
    }
    const valid = validate(data);
    checked.errors = validate.errors;
    return valid;
  };
  return checked;
}

/**
 * Validation without guessing: a JSON body is taken as sent (`["a"]` is not the string "a", `true`
 * is not 1, null is not false), while query strings and path parameters, which are text, are
 * converted to the declared numbers and booleans only when written plainly.
 */
export function registerValidation(app: FastifyInstance): void {
  const compilers = AjvCompiler();
  const strict = compilers({}, { customOptions: { ...COMMON, coerceTypes: false } });
  const fromText = compilers({}, { customOptions: { ...COMMON, coerceTypes: 'array' } });
  app.setValidatorCompiler((route) =>
    route.httpPart === 'body'
      ? strict(route)
      : strictNumbers(route.schema as FastifySchema, fromText(route) as Validate),
  );
}

/**
 * Validates a body against an operation's schema outside a route (the dashboard's forms build the
 * same bodies the API takes): the same compiler, formats and messages; a 422 naming each field.
 */
export function bodyValidator<S extends TSchema>(schema: S): (data: unknown) => Static<S> {
  const validate = AjvCompiler()({}, { customOptions: { ...COMMON, coerceTypes: false } })({
    schema,
    method: 'POST',
    url: '/',
    httpPart: 'body',
  }) as Validate;
  return (data) => {
    if (validate(data)) return data as Static<S>;
    throw errors.validation((validate.errors ?? []).map((issue) => fieldOf(issue as never, 'body')));
  };
}
