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

const COMMON = { removeAdditional: false, useDefaults: true, formats: FORMATS } as const;

/**
 * Input holding at most this many values (array items, properties, scalars) gets every failing field
 * in its 422; larger input, its first. Listing every error of a large input costs the validator about
 * 4 µs an error: a 1 MiB body of 340,000 empty strings took 2.6 s and answered 97 MB.
 */
export const ALL_ERRORS_MAX_VALUES = 2_000;

/** Whether `data` holds at most `max` values, counted only as far as `max`. */
function valuesAtMost(data: unknown, max: number): boolean {
  let left = max;
  const stack: unknown[] = [data];
  while (stack.length > 0) {
    const value = stack.pop();
    left -= 1;
    if (left < 0) return false;
    if (typeof value === 'object' && value !== null)
      for (const inner of Array.isArray(value) ? value : Object.values(value)) stack.push(inner);
    if (stack.length > left) return false;
  }
  return true;
}

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

type Compile = (route: Parameters<Parameters<FastifyInstance['setValidatorCompiler']>[0]>[0]) => Validate;

/**
 * Validates with a validator that stops at the first error; a failure of input small enough is
 * validated again, made on first need, to name every failing field (ALL_ERRORS_MAX_VALUES).
 */
function firstThenAll(route: Parameters<Compile>[0], firstError: Compile, everyError: Compile): Validate {
  const first = firstError(route);
  let every: Validate | undefined;
  const checked: Validate = (data) => {
    if (first(data)) {
      checked.errors = null;
      return true;
    }
    checked.errors = first.errors;
    if (valuesAtMost(data, ALL_ERRORS_MAX_VALUES)) {
      every ??= everyError(route);
      if (!every(data)) checked.errors = every.errors;
    }
    return false;
  };
  return checked;
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
  registerWellFormedJson(app);
  const [strict, fromText] = [validators(false), validators('array')];
  app.setValidatorCompiler((route) =>
    route.httpPart === 'body' ? strict(route) : strictNumbers(route.schema as FastifySchema, fromText(route)),
  );
}

/**
 * An escape of a UTF-16 surrogate: the only way JSON text can hold one, since UTF-8 cannot encode
 * them. (An escaped backslash before "ud800" matches too, and the full check then finds nothing.)
 */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** A surrogate code unit not part of a pair (in a /u regex, a pair is one code point, not Cs). */
const LONE_SURROGATE = /\p{Cs}/u;

/** The path of the first string or key in `value` that holds half a character, or null. */
function notWellFormedAt(value: unknown, path: string[] = []): string | null {
  if (typeof value === 'string') return LONE_SURROGATE.test(value) ? path.join('.') : null;
  if (typeof value !== 'object' || value === null) return null;
  for (const [key, item] of Object.entries(value)) {
    const at = LONE_SURROGATE.test(key) ? [...path, key].join('.') : notWellFormedAt(item, [...path, key]);
    if (at !== null) return at;
  }
  return null;
}

/**
 * JSON bodies as fastify parses them, refusing half a character: a lone surrogate (a client that cut
 * text inside an emoji) would fail PostgreSQL's jsonb with a 500, and turn into U+FFFD in its text
 * columns, so that what was stored differed from what the answer and the webhooks carry.
 */
function registerWellFormedJson(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string; // parseAs: 'string'
    parse(request, text, (error, value) => {
      if (error) return done(error);
      const at = SURROGATE_ESCAPE.test(text) ? notWellFormedAt(value) : null;
      if (at === null) return done(null, value);
      done(
        errors.validation([
          {
            in: 'body',
            field: at,
            message: 'must be whole characters: half of one (a lone UTF-16 surrogate) is not text',
          },
        ]),
      );
    });
  });
}

/** A compiler of validators that take input as sent (false) or converted from text ('array'). */
function validators(coerceTypes: false | 'array'): Compile {
  const compilers = AjvCompiler();
  const compiler = (allErrors: boolean) =>
    compilers({}, { customOptions: { ...COMMON, coerceTypes, allErrors } }) as Compile;
  const [firstError, everyError] = [compiler(false), compiler(true)];
  return (route) => firstThenAll(route, firstError, everyError);
}

/**
 * Validates a body against an operation's schema outside a route (the dashboard's forms build the
 * same bodies the API takes): the same compiler, formats and messages; a 422 naming each field.
 */
export function bodyValidator<S extends TSchema>(schema: S): (data: unknown) => Static<S> {
  const validate = validators(false)({ schema, method: 'POST', url: '/', httpPart: 'body' });
  return (data) => {
    if (validate(data)) return data as Static<S>;
    throw errors.validation((validate.errors ?? []).map((issue) => fieldOf(issue as never, 'body')));
  };
}
