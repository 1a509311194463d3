import type { Route } from '../platform/route.js';
import { ErrorBody } from '../platform/schemas.js';

/** Just enough of an OpenAPI 3.1 document to walk its operations' inputs and answers. */
interface Document {
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, unknown> };
}
interface Operation {
  parameters?: { required?: boolean; schema?: Record<string, unknown> }[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: BodySchema }> };
  responses?: Record<string, { content?: Record<string, { schema?: object }> }>;
}
export interface BodySchema {
  required?: string[];
  properties?: Record<string, { default?: unknown }>;
}

/** The fields a body must carry: those required that have no default (the pipeline fills those in). */
export function neededFields(schema: BodySchema): string[] {
  return (schema.required ?? []).filter((field) => !('default' in (schema.properties?.[field] ?? {})));
}

/**
 * Says in the document what the pipeline accepts: a body field or a parameter with a default may be
 * left out (the default is used), and a body whose every field is optional may be left out (it reads
 * as {}). @fastify/swagger marks every body, every listed parameter and every field without
 * Type.Optional required.
 */
export function markOptionalInputs<D extends object>(document: D): D {
  for (const operations of Object.values((document as Document).paths ?? {})) {
    for (const operation of Object.values(operations)) {
      const body = operation.requestBody;
      for (const media of Object.values(body?.content ?? {})) {
        if (!media.schema?.required) continue;
        const { required, ...schema } = media.schema;
        const needed = neededFields(media.schema);
        // A copy: the route's own schema, which validates requests, stays as declared.
        media.schema = needed.length > 0 ? { ...schema, required: needed } : schema;
      }
      if (body && Object.values(body.content ?? {}).every((media) => !media.schema?.required?.length))
        body.required = false;
      for (const parameter of operation.parameters ?? [])
        if (parameter.schema && 'default' in parameter.schema) parameter.required = false;
    }
  }
  return document;
}

/** JSON with every object's keys sorted, so that two schemas compare whatever order built them. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, inner: unknown) =>
    inner && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(Object.entries(inner).sort(([a], [b]) => a.localeCompare(b)))
      : inner,
  );

const withoutDescription = ({ description: _description, ...schema }: { description?: unknown }) => schema;

/** A schema as @fastify/swagger writes it into an OpenAPI 3.1 document: `const` becomes a one-value `enum`. */
const asDocumented = (schema: unknown): unknown =>
  JSON.parse(JSON.stringify(schema), (_key, value: unknown) => {
    if (!value || typeof value !== 'object' || Array.isArray(value) || !('const' in value)) return value;
    const { const: only, ...rest } = value as { const: unknown };
    return { ...rest, enum: [only] };
  });

/**
 * Names the error body once, as `components.schemas.Error`, and points every error response at it:
 * written out in each of the ~1,200 error responses it made up most of the document (and of the SDK's
 * generated types). Each response keeps its own description of what the status means there.
 */
export function shareErrorBody<D extends object>(document: D): D {
  const shared = withoutDescription(asDocumented(ErrorBody) as { description?: unknown });
  const sharedText = canonical(shared);
  const reference = { $ref: '#/components/schemas/Error' };
  for (const operations of Object.values((document as Document).paths ?? {}))
    for (const operation of Object.values(operations))
      for (const response of Object.values(operation.responses ?? {}))
        for (const media of Object.values(response.content ?? {}))
          if (media.schema && canonical(withoutDescription(media.schema)) === sharedText)
            media.schema = reference;
  const components = (document as Document).components ?? {};
  components.schemas = { ...components.schemas, Error: { ...shared, description: ErrorBody.description } };
  (document as Document).components = components;
  return document;
}

/** An OpenAPI link: the operation a client may call next, and where its parameters come from. */
export interface OpenApiLink {
  operationId: string;
  parameters: Record<string, string>;
}

const pathParameters = (url: string) => [...url.matchAll(/:(\w+)/g)].map((match) => match[1]!);

/**
 * OpenAPI links from each create (a POST on a collection whose answer has an `id`, or the field its
 * `itemId` names) to the operations on the item it made: `POST /v1/webhooks` →
 * `GET|PATCH|DELETE /v1/webhooks/{endpoint_id}` and the operations below it. The item's parameter
 * takes that field of the answer; the collection's own parameters are the request's. The contract
 * fuzz follows them to chain create → read → change → delete on real resources instead of made-up ids.
 */
export function itemLinks(routes: readonly Route[]): Map<string, Record<string, OpenApiLink>> {
  const links = new Map<string, Record<string, OpenApiLink>>();
  for (const create of routes) {
    const itemId = create.itemId ?? 'id';
    const answersId = (create.response as { properties?: Record<string, unknown> }).properties?.[itemId];
    if (create.method !== 'POST' || !answersId || create.hidden) continue;
    const own = new Set(pathParameters(create.url));
    const item = new RegExp(`^${create.url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/:(\\w+)(/|$)`);
    const found: Record<string, OpenApiLink> = {};
    for (const next of routes) {
      const [, itemParameter, underItem] = item.exec(next.url) ?? [];
      if (!itemParameter || next.hidden) continue;
      // Removing something under the item (a reaction, a like, a phone) needs it put first: right
      // after the create there is nothing, and its 404 is right.
      if (next.method === 'DELETE' && underItem === '/') continue;
      const parameters = Object.fromEntries(
        pathParameters(next.url).map((name) => [
          name,
          name === itemParameter
            ? `$response.body#/${itemId}`
            : own.has(name)
              ? `$request.path.${name}`
              : undefined,
        ]),
      );
      // Only where every parameter is known: an item's own sub-items need their own create first.
      if (Object.values(parameters).some((value) => value === undefined)) continue;
      found[next.operationId] = {
        operationId: next.operationId,
        parameters: parameters as Record<string, string>,
      };
    }
    if (Object.keys(found).length > 0) links.set(create.operationId, found);
  }
  return links;
}
