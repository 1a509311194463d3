import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Accrual } from '../platform/accrual.js';
import { type AdmissionScript, rateLimitHeaders } from '../platform/admission.js';
import { callerOrder } from '../platform/caller.js';
import type { ErrorStatus } from '../platform/errors.js';
import type { HeldKey, Idempotency } from '../platform/idempotency.js';
import type { Metering } from '../platform/metering.js';
import { formatUsd } from '../platform/money.js';
import type { AuthKind, Route } from '../platform/route.js';
import { answerSchema, errorResponses } from '../platform/schemas.js';
import type { Db } from '../platform/transaction.js';
import { type AuthDeps, admissionHook, authHook, spends } from './auth.js';
import {
  answerOnce,
  IDEMPOTENCY_MEANINGS,
  IdempotencyKeyHeader,
  idempotencyKeyOf,
  takesIdempotencyKey,
} from './idempotency.js';
import { type BodySchema, itemLinks, neededFields, type OpenApiLink } from './openapi.js';

export interface PipelineDeps extends AuthDeps {
  metering: Metering;
  accrual: Accrual;
  idempotency: Idempotency;
}

const KEYED: ReadonlySet<AuthKind> = new Set(['secret-key', 'publishable-key', 'user-token']);

/** The errors every operation of an auth kind can answer (503: PostgreSQL or Redis is away). */
const AUTH_ERRORS: Record<AuthKind, ErrorStatus[]> = {
  'secret-key': [401, 422, 429, 500, 503],
  'publishable-key': [401, 422, 429, 500, 503],
  'user-token': [401, 422, 429, 500, 503],
  internal: [401, 422, 500, 503],
  signed: [401, 422, 500, 503],
  public: [500, 503],
};

const SECURITY: Partial<Record<AuthKind, { [scheme: string]: string[] }[]>> = {
  'secret-key': [{ bearerKey: [] }, { apiKeyHeader: [] }],
  'publishable-key': [{ publishableKey: [] }],
  'user-token': [{ userToken: [] }],
};

/** What a browser client may send to the operations it calls: which header carries its credential. */
const CLIENT_HEADERS: Partial<Record<AuthKind, string>> = {
  'publishable-key': 'content-type, x-publishable-key',
  'user-token': 'content-type, authorization, idempotency-key',
};

/** Browsers on any origin call the client operations (publishable key, user token). */
const CORS_HEADERS = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers':
    'x-svc-cost-usd, x-request-id, ratelimit-limit, ratelimit-remaining, ratelimit-reset, retry-after, idempotent-replayed',
};

/**
 * The methods of the resource a URL path names: those declared on the most specific paths it matches
 * (a parameter takes one segment, `*` the rest; `/v1/orgs/usage` is the usage report's, not an org's),
 * for the 405 of a method asked where it is not declared.
 */
export function allowedMethodsOf(routes: readonly Route[]): (path: string) => string[] {
  const patterns = routes.map((declared) => {
    const segments = declared.url.split('/');
    return {
      method: declared.method,
      variables: segments.filter((segment) => segment.startsWith(':') || segment === '*').length,
      matches: new RegExp(
        `^${segments
          .map((segment) =>
            segment.startsWith(':')
              ? '[^/]+'
              : segment === '*'
                ? '.*'
                : segment.replace(/[.+?^${}()|[\]\\]/g, '\\$&'),
          )
          .join('/')}$`,
      ),
    };
  });
  return (path) => {
    const matching = patterns.filter((pattern) => pattern.matches.test(path));
    const fewest = Math.min(...matching.map((pattern) => pattern.variables));
    const methods = matching
      .filter((pattern) => pattern.variables === fewest)
      .map((pattern) => pattern.method);
    return [...new Set(methods)].sort();
  };
}

/**
 * Aborted when the client goes before its answer: work done on its behalf elsewhere stops. Made when
 * a handler first asks for it (most never do: a controller and a listener per request showed in a
 * mint's profile). An answer already handed over (ended, if not yet flushed) is not gone:
 * light-my-request closes before it finishes, and an abort's DOMException costs a stack trace.
 */
function goneSignal(reply: FastifyReply): AbortSignal {
  const response = reply.raw;
  const gone = new AbortController();
  if (response.closed) {
    if (!response.writableEnded) gone.abort();
  } else {
    response.once('close', () => {
      if (!response.writableEnded) gone.abort();
    });
  }
  return gone.signal;
}

function errorStatuses(declared: Route): ErrorStatus[] {
  // A status the route answers with a body of its own (readiness's 503) is not an error body.
  const statuses = [...AUTH_ERRORS[declared.auth], ...(declared.errors ?? [])].filter(
    (status) => !declared.otherResponses?.[status],
  );
  if (declared.price || declared.needsBalance || declared.paidPlan) statuses.push(402);
  // Whatever takes input can be sent input its schema refuses.
  const takesInput = declared.params || declared.query || declared.body;
  if (takesInput && !statuses.includes(422)) statuses.push(422);
  return [...new Set(statuses)];
}

/**
 * Turns declarations into fastify routes: the auth kind's hook, schemas for validation, serialization
 * and OpenAPI, the operation id as the OpenAPI operationId, metric label and log field, for a priced
 * operation the transaction its charge joins and the cost header from what was charged, and for every
 * POST of a secret key or a user token the Idempotency-Key header.
 */
export function registerRoutes(app: FastifyInstance, routes: readonly Route[], deps: PipelineDeps): void {
  const operationIds = new Set<string>();
  const rawBodies = new Set<string>();
  /** The client operations' methods per path, for one CORS preflight answer per path. */
  const preflights = new Map<string, { methods: Set<string>; headers: string; operationId: string }>();
  const links = itemLinks(routes);
  for (const declared of routes) {
    if (operationIds.has(declared.operationId))
      throw new Error(`operation ${declared.operationId} is declared twice`);
    operationIds.add(declared.operationId);
    // A turn's works may run twice: admitting in the handler would count the request twice.
    if (declared.chargedTogether && (!declared.price || declared.admission === 'in-handler'))
      throw new Error(`${declared.operationId} is charged together but has no price or admits itself`);
    if (declared.locksCallerFirst && !declared.chargedTogether)
      throw new Error(`${declared.operationId} orders a turn's works but is not charged together`);
    if (declared.rawBody && !rawBodies.has(declared.rawBody)) {
      rawBodies.add(declared.rawBody);
      app.addContentTypeParser(declared.rawBody, { parseAs: 'string' }, (_request, body, done) =>
        done(null, body),
      );
    }
    const clientHeaders = CLIENT_HEADERS[declared.auth];
    if (clientHeaders) {
      const preflight = preflights.get(declared.url) ?? {
        methods: new Set<string>(),
        headers: clientHeaders,
        operationId: `${declared.operationId}.preflight`,
      };
      preflight.methods.add(declared.method);
      preflights.set(declared.url, preflight);
    }
    registerRoute(app, declared, deps, links.get(declared.operationId));
  }
  for (const [url, preflight] of preflights) {
    app.options(
      url,
      { schema: { hide: true }, config: { operationId: preflight.operationId } },
      async (_request, reply) =>
        reply
          .code(204)
          .headers({
            ...CORS_HEADERS,
            'access-control-allow-methods': [...preflight.methods].join(', '),
            'access-control-allow-headers': preflight.headers,
            'access-control-max-age': '600',
          })
          .send(),
    );
  }
}

function registerRoute(
  app: FastifyInstance,
  declared: Route,
  deps: PipelineDeps,
  links: Record<string, OpenApiLink> | undefined,
): void {
  const keyed = KEYED.has(declared.auth);
  const idempotent = takesIdempotencyKey(declared);
  const onRequest = authHook(declared, deps);
  const admission = admissionHook(declared, deps);
  // A body whose every field is optional or has a default may be left out: it reads as {} (a chat by
  // code), as the OpenAPI document says (markOptionalInputs). A body sent as JSON null is not left
  // out, and is validated (a 422).
  const optionalBody = declared.body !== undefined && neededFields(declared.body as BodySchema).length === 0;
  const preValidation = [
    ...(optionalBody
      ? [
          async (request: FastifyRequest) => {
            if (request.body === undefined) request.body = {};
          },
        ]
      : []),
    ...(admission ? [admission] : []),
  ];
  const onSend = [];
  if (keyed && declared.method === 'GET') {
    // Reads are free, but their response bytes count as bandwidth, accrued now and metered a moment later.
    onSend.push(async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
      const { principal } = request;
      // A HEAD runs the GET and drops the body: nothing was sent.
      if (principal && request.method === 'GET' && reply.statusCode >= 200 && reply.statusCode < 300) {
        const bytes =
          typeof payload === 'string' || Buffer.isBuffer(payload) ? Buffer.byteLength(payload) : 0;
        await deps.accrual
          .add(principal, { product: 'bandwidth', metric: 'gb', quantity: bytes })
          .catch((error: unknown) => request.log.warn({ err: error }, 'bandwidth not accrued'));
      }
      return payload;
    });
  }
  const { costField } = declared;
  if (costField) {
    // The body is serialized before the charge is known (and kept so for replays): the field is set
    // here, from the same figure as the header, on first answers and replays alike.
    onSend.push(async (request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
      if (typeof payload !== 'string' || reply.statusCode >= 300) return payload;
      const body = JSON.parse(payload) as Record<string, unknown>;
      // cost_milli: thousandths of a dollar (the spec's integer; its prices are whole ones).
      body[costField] =
        costField === 'cost_milli' ? request.costMicros / 1_000 : Number(formatUsd(request.costMicros));
      return JSON.stringify(body);
    });
  }
  if (CLIENT_HEADERS[declared.auth]) {
    onSend.push(async (_request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
      reply.headers(CORS_HEADERS);
      return payload;
    });
  }

  app.route({
    method: declared.method,
    url: declared.url,
    config: { operationId: declared.operationId },
    ...(links ? { links: { [String(declared.status ?? 200)]: links } } : {}),
    ...(declared.logLevel ? { logLevel: declared.logLevel } : {}),
    // A priced GET has no HEAD: it would charge for an answer whose body nobody receives.
    ...(declared.head === false || declared.price ? { exposeHeadRoute: false } : {}),
    // An operation that admits in its handler gets its validation failure there, to admit it first.
    ...(declared.admission === 'in-handler' ? { attachValidation: true } : {}),
    childLoggerFactory: (logger, bindings, options) =>
      logger.child({ ...bindings, operation: declared.operationId }, options),
    schema: {
      operationId: declared.operationId,
      tags: declared.tags,
      summary: declared.summary,
      ...(declared.description ? { description: declared.description } : {}),
      ...(declared.hidden ? { hide: true } : {}),
      ...(SECURITY[declared.auth] ? { security: SECURITY[declared.auth] } : {}),
      ...(declared.params ? { params: declared.params } : {}),
      ...(declared.query ? { querystring: declared.query } : {}),
      ...(declared.body ? { body: declared.body } : {}),
      ...(idempotent ? { headers: IdempotencyKeyHeader } : {}),
      response: {
        [declared.status ?? 200]: answerSchema(declared.response, declared.produces),
        ...Object.fromEntries(
          Object.entries(declared.otherResponses ?? {}).map(([status, schema]) => [
            status,
            answerSchema(schema, declared.produces),
          ]),
        ),
        ...errorResponses(errorStatuses(declared), idempotent ? IDEMPOTENCY_MEANINGS : {}),
      },
    },
    ...(onRequest ? { onRequest } : {}),
    ...(preValidation.length > 0 ? { preValidation } : {}),
    ...(onSend.length > 0 ? { onSend } : {}),
    handler: async (request, reply) => {
      reply.code(declared.status ?? 200);
      const principal = request.principal;
      const handlerHeaders: Record<string, string> = {};
      /** Whether admission ran, admitted or refused (over the cap, locked out). */
      let admissionRan = false;
      const admit = async (script?: AdmissionScript, keys?: string[], args?: (string | number)[]) => {
        admissionRan = true;
        const admitted = await deps.admission.admit(
          { address: request.ip, principal: principal!, spends: spends(declared) },
          script,
          keys,
          args,
        );
        request.admitted = true;
        reply.headers(rateLimitHeaders(admitted.quota));
        return admitted.result;
      };
      if (request.validationError) {
        // Invalid requests count toward the daily cap as on every other operation (and a refused
        // one gets the refusal): admitted alone, without the operation's own script.
        if (principal) await admit();
        throw request.validationError;
      }
      let signal: AbortSignal | undefined;
      const call = {
        get signal() {
          signal ??= goneSignal(reply);
          return signal;
        },
        params: request.params,
        query: request.query,
        body: request.body,
        caller: principal,
        client: { address: request.ip, userAgent: request.headers['user-agent'] ?? '' },
        headers: request.headers,
        log: request.log,
        reply: {
          status: (code: number) => void reply.code(code),
          header: (name: string, value: string) => {
            handlerHeaders[name.toLowerCase()] = value;
            reply.header(name, value);
          },
        },
        admit: async (script: AdmissionScript, keys: string[], args: (string | number)[]) => {
          if (declared.admission !== 'in-handler' || !principal || request.admitted) {
            throw new Error(`${declared.operationId} admitted a request twice or without declaring it`);
          }
          return admit(script, keys, args);
        },
      };
      /** Runs the handler; `keep` records its answer, in the transaction of its charge when priced. */
      const run = async (held?: HeldKey, keep?: (result: unknown, db?: Db) => Promise<string>) => {
        if (declared.price) {
          const charged = await deps.metering.charge(
            principal!,
            [{ ...declared.price, quantity: declared.price.quantity ?? 1 }],
            async (tx) => {
              // The call with its transaction, without reading its lazy getters (the abort signal).
              const result = await declared.handler(Object.create(call, { tx: { value: tx } }) as never);
              return keep ? keep(result, tx) : result;
            },
            {
              idempotencyKey: held?.key ?? null,
              inFull: declared.irreversible === true,
              ...(declared.chargedTogether && {
                together: { order: declared.locksCallerFirst ? callerOrder(principal!) : '' },
              }),
            },
          );
          request.costMicros += charged.costMicros;
          return charged.result;
        }
        const result = await declared.handler(call as never);
        return keep ? keep(result) : result;
      };
      const key = idempotent ? idempotencyKeyOf(request) : undefined;
      let body: unknown;
      try {
        // Without a key, nothing of idempotency runs: not a statement more.
        body =
          key === undefined
            ? await run()
            : await answerOnce({
                declared,
                request,
                reply,
                idempotency: deps.idempotency,
                key,
                handlerHeaders,
                admit: () => admit(),
                run,
              });
      } catch (error) {
        // Refused before it admitted itself (a 404, a 403): the request counts toward the daily cap
        // as on every other operation (and one over it gets that refusal), admitted alone.
        if (keyed && !request.admitted && !admissionRan) await admit();
        throw error;
      }
      if (keyed && !request.admitted) {
        throw new Error(`${declared.operationId} answered without admitting the request`);
      }
      return body;
    },
  });
}
