import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import type { FastifyInstance } from 'fastify';

type Schema = Record<string, unknown>;

/** Keywords whose values are data, not schemas: left as they are. */
const DATA_KEYWORDS = new Set(['const', 'enum', 'default', 'examples', 'example']);

const isSchema = (value: unknown): value is Schema =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const isNull = (schema: Schema) => schema.type === 'null';

const stringConstant = (schema: Schema) => (typeof schema.const === 'string' ? schema.const : undefined);

/**
 * A response schema as the serializer needs it, the same answers written. fast-json-stringify writes
 * an `anyOf` by trying each option with Ajv on every value; TypeBox writes a union of string literals
 * (`literalUnion`, `Type.Union` of `Type.Literal`s) and a nullable field (`Type.Union([X, Type.Null()])`)
 * so. As a string `enum` and as `nullable`, they are written without a check: the union of a shield
 * ticket's verdict alone cost a call 19 µs. Other unions are left as they are. The OpenAPI document
 * and request validation keep the schemas as declared.
 */
export function forSerializing(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(forSerializing);
  if (!isSchema(schema)) return schema;
  const copy: Schema = {};
  for (const [keyword, value] of Object.entries(schema))
    copy[keyword] = DATA_KEYWORDS.has(keyword) ? value : forSerializing(value);
  const options = copy.anyOf;
  if (!Array.isArray(options) || !options.every(isSchema)) return copy;
  const { anyOf: _, ...siblings } = copy;
  const present = options.filter((option) => !isNull(option));
  const hasNull = present.length < options.length;
  const nullable = hasNull ? { nullable: true } : {};
  const constants = present.map(stringConstant);
  if (present.length > 0 && constants.every((constant) => constant !== undefined))
    return { ...siblings, type: 'string', enum: constants, ...nullable };
  const [only] = present;
  if (hasNull && present.length === 1 && only && only.anyOf === undefined)
    return { ...only, ...siblings, nullable: true };
  return copy;
}

/** Responses are written from their schemas as `forSerializing` rewrites them. */
export function registerSerialization(app: FastifyInstance): void {
  const compile = SerializerSelector()({}, {});
  app.setSerializerCompiler(({ schema, method, url, httpStatus }) =>
    // Fastify compiles serializers for response statuses only; 'default' is its name for the rest.
    compile({ schema: forSerializing(schema), method, url, httpStatus: httpStatus ?? 'default' }),
  );
}
