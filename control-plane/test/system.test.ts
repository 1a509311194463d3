import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestContext } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

describe('/healthz', () => {
  it('says the process is up and every dependency answers, with no key', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: '/healthz' });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toEqual({
      status: 'ok',
      down: [],
      checks: { postgres: 'ok', redis: 'ok', ejabberd: 'ok', livekit: 'ok', minio: 'ok' },
    });
  });
});

/** Enough of an operation of the OpenAPI document to read its answers' schemas. */
interface Operation {
  responses?: Record<string, { content: Record<string, { schema?: JsonSchema }> }>;
}
interface JsonSchema {
  $ref?: string;
  required?: string[];
  properties?: Record<string, unknown>;
}

describe('/v1/openapi.json', () => {
  it('is OpenAPI 3.1, version 1.1.0, generated from the route schemas', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(response.statusCode).toBe(200);
    const document = response.json();
    expect(document.openapi).toBe('3.1.0');
    expect(document.info.version).toBe('1.1.0');
    const balance = document.paths['/v1/realtime/balance'].get;
    expect(balance.responses['200'].content['application/json'].schema.properties).toHaveProperty('ledger');
    // The error body is written once and every error response points at it, each saying what its
    // status means there.
    expect(document.components.schemas.Error.properties.error.properties).toHaveProperty('fields');
    expect(balance.responses['422']).toEqual({
      description: 'Validation failed: every failing field is listed',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    });
    const errorSchemas = Object.values(document.paths as Record<string, Record<string, Operation>>)
      .flatMap((operations) => Object.values(operations))
      .flatMap((operation) => Object.entries(operation.responses ?? {}))
      .filter(([status]) => Number(status) >= 400)
      .map(([, response]) => response.content['application/json']?.schema);
    expect(errorSchemas.length).toBeGreaterThan(1000);
    // /readyz's 503 is its own report, not an error body.
    expect(errorSchemas.filter((schema) => !schema?.$ref)).toEqual([
      expect.objectContaining({ required: ['status', 'checks'] }),
    ]);
    expect(document.components.securitySchemes).toHaveProperty('bearerKey');
    expect(document.paths).not.toHaveProperty('/metrics');
    // What may be left out says so: a parameter with a default, a body of optional fields.
    const days = document.paths['/v1/realtime/usage'].get.parameters.find(
      (parameter: { name: string }) => parameter.name === 'days',
    );
    expect(days).toMatchObject({ required: false, schema: { default: 30 } });
    expect(document.paths['/v1/realtime/app'].patch.requestBody.required).toBe(false);
    expect(document.paths['/v1/webhooks'].post.requestBody.required).toBe(true);
    // Input the schema refuses is a 422, on public operations too.
    expect(document.paths['/media/{id}'].get.responses).toHaveProperty('422');
    // The dashboard's pages are for people, not operations of the API.
    expect(Object.keys(document.paths).filter((path) => path.startsWith('/dashboard'))).toEqual([]);
  });

  it('gives every delete the one shape {ok: true, id}', async () => {
    const document = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const paths = document.paths as Record<string, { delete?: Operation }>;
    const deletes = Object.entries(paths).flatMap(([path, operations]) =>
      operations.delete ? [[path, operations.delete] as const] : [],
    );
    expect(deletes.length).toBeGreaterThan(1);
    for (const [path, operation] of deletes) {
      const schema = operation.responses?.['200']?.content['application/json']?.schema;
      expect({ path, required: schema?.required }).toMatchObject({
        path,
        required: expect.arrayContaining(['ok', 'id']),
      });
      expect(schema?.properties?.ok).toMatchObject({ enum: [true] });
      expect(schema?.properties?.id).toMatchObject({ type: 'string' });
    }
  });
});

describe('metrics', () => {
  it('are served on the internal listener only', async () => {
    const publicly = await ctx.app.inject({ method: 'GET', url: '/metrics' });
    expect(publicly.statusCode).toBe(404);
    expect(publicly.json().error.type).toBe('not_found');
  });

  it('count requests of both listeners by operation id in Prometheus format', async () => {
    await ctx.app.inject({ method: 'GET', url: '/v1/realtime/balance' });
    await ctx.internal.inject({ method: 'POST', url: '/internal/minio/events', payload: {} });
    const response = await ctx.internal.inject({ method: 'GET', url: '/metrics' });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toMatch(/^text\/plain/);
    expect(response.body).toMatch(
      /svc_http_requests_total\{operation="billing\.balance\.get",method="GET",status="401"\} [1-9]/,
    );
    expect(response.body).toMatch(
      /svc_http_requests_total\{operation="storage\.events",method="POST",status="401"\} [1-9]/,
    );
    expect(response.body).toContain('svc_http_request_duration_seconds_bucket');
  });
});
