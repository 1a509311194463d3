import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errors, type FieldError, ServiceError } from '../platform/errors.js';
import { TEXT_FORMATS } from '../platform/identities.js';
import { unavailableDependency } from '../platform/unavailable.js';

type ValidationContext = 'body' | 'querystring' | 'params' | 'headers';

const PLACE: Record<ValidationContext, FieldError['in']> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

type AjvIssue = NonNullable<FastifyError['validation']>[number];

/** Turns one Ajv issue into the field it names, e.g. `/messages/0/role` -> `messages.0.role`. */
export function fieldOf(issue: AjvIssue, context: ValidationContext): FieldError {
  const path = issue.instancePath.split('/').filter(Boolean);
  const params = issue.params as Record<string, unknown>;
  let message = issue.message ?? 'is invalid';
  if (issue.keyword === 'required') {
    path.push(String(params.missingProperty));
    message = 'is required';
  } else if (issue.keyword === 'additionalProperties') {
    path.push(String(params.additionalProperty));
    message = 'is not a known field';
  } else if (issue.keyword === 'enum' && Array.isArray(params.allowedValues)) {
    message = `must be one of: ${params.allowedValues.join(', ')}`;
  } else if (issue.keyword === 'format' && Object.hasOwn(TEXT_FORMATS, String(params.format))) {
    // Ajv would say `must match format "external-id"`; the rule in words says what to send instead.
    message = TEXT_FORMATS[params.format as keyof typeof TEXT_FORMATS].message;
  }
  return { in: PLACE[context], field: path.join('.') || '(body)', message };
}

function uniqueFields(fields: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return fields.filter((f) => {
    const key = `${f.in}:${f.field}:${f.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** fastify's messages that do not say what to do. */
const CLEARER_MESSAGES: Record<string, string> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'Unsupported content type: send the body as application/json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'The request body is over the 1 MiB limit',
};

/**
 * Maps anything thrown to the spec's error body: a ServiceError renders itself (whichever layer threw
 * it), fastify's validation failures are 422 with their fields, its other 4xx keep their meaning, a
 * PostgreSQL or Redis that is away is a 503 to retry, and anything else is a 500 that shows no internals.
 */
export function toServiceError(error: FastifyError | Error, requestId: string): ServiceError {
  if (error instanceof ServiceError) return error;
  const fastifyError = error as FastifyError;
  if (fastifyError.validation) {
    const context = (fastifyError.validationContext ?? 'body') as ValidationContext;
    return errors.validation(uniqueFields(fastifyError.validation.map((issue) => fieldOf(issue, context))));
  }
  const status = fastifyError.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    // fastify's own 4xx: unparseable JSON, an empty body, an unsupported media type, a body over the
    // limit, a path parameter too long. Each is a request that fails validation: 422, as the spec
    // answers every validation failure, with fastify's message (which names the limit).
    const message =
      CLEARER_MESSAGES[fastifyError.code] ?? fastifyError.message.replace(/^FST_[A-Z_]+:\s*/, '');
    return new ServiceError('invalid_request', message);
  }
  return unavailableDependency(error) ?? errors.internal(requestId);
}

/** Renders anything thrown as the spec's error body; also fastify's `frameworkErrors` (bad URLs). */
export function renderError(
  error: FastifyError | ServiceError,
  request: FastifyRequest,
  reply: FastifyReply,
) {
  const rendered = toServiceError(error, request.id);
  if (rendered.status >= 500) {
    request.log.error(
      { err: error, ...(rendered.detail ? { detail: rendered.detail } : {}) },
      'request failed',
    );
  } else if (rendered.detail) {
    request.log.warn({ detail: rendered.detail }, rendered.message);
  }
  reply.headers(rendered.headers);
  return reply.code(rendered.status).send(rendered.toBody());
}

/** The methods the API's routes (and CORS preflights) use. */
const ROUTED_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * `allowedMethods` names the methods the API takes on a path: a path it has, asked with another
 * method, is a 405 with Allow rather than a 404.
 */
export function registerErrorHandling(
  app: FastifyInstance,
  allowedMethods: (path: string) => string[] = () => [],
): void {
  /** No route for this method and path: 405 where the path takes other methods, else 404. */
  const unrouted = (request: FastifyRequest) => {
    const path = request.url.split('?')[0]!;
    const allowed = allowedMethods(path);
    return allowed.length > 0
      ? errors.methodNotAllowed(request.method, path, allowed)
      : errors.notFound(`Route ${request.method} ${path}`);
  };

  app.setErrorHandler(renderError);

  // A method no route takes (QUERY, TRACE…) is answered before its body is read.
  app.addHook('onRequest', async (request) => {
    if (!ROUTED_METHODS.has(request.method)) throw unrouted(request);
  });

  app.setNotFoundHandler((request, reply) => renderError(unrouted(request), request, reply));
}
