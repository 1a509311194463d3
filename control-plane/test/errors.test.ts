import { Type } from '@sinclair/typebox';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../src/app.js';
import { ALL_ERRORS_MAX_VALUES } from '../src/http/validation.js';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

/** Routes declared the way every module declares them, to see validation and failures end to end. */
function probeRoutes(app: App) {
  app.post(
    '/test/validated/:id',
    {
      schema: {
        params: Type.Object({ id: Type.String({ pattern: '^[a-z]+$' }) }),
        querystring: Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) }),
        body: Type.Object(
          {
            user_id: Type.String({ minLength: 1 }),
            ttl_seconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 86_400 })),
            kind: Type.Optional(Type.Union([Type.Literal('live'), Type.Literal('call')])),
            tags: Type.Optional(Type.Array(Type.String({ maxLength: 3 }))),
          },
          { additionalProperties: false },
        ),
      },
    },
    async (request) => ({ ok: true, body: request.body }),
  );
  app.get('/test/crash', async () => {
    throw new Error('connection to 10.0.0.7:5432 failed: password authentication failed for user "svc"');
  });
  // A query PostgreSQL cancels at its statement timeout, as it would a stalled one.
  app.get('/test/stalled', async () =>
    ctx.container.pool.transaction(async (tx) => {
      await tx.query(sql.unsafe`set local statement_timeout = 50`);
      return tx.query(sql.unsafe`select pg_sleep(1)`);
    }),
  );
}

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp({ extraRoutes: probeRoutes });
});
afterAll(async () => {
  await ctx.close();
});

const post = (body: unknown, url = '/test/validated/abc') =>
  ctx.app.inject({ method: 'POST', url, payload: body as object });

describe('validation failures', () => {
  it('answer 422 and list every failing field', async () => {
    const response = await post({ ttl_seconds: 59, kind: 'video', tags: ['ok', 'toolong'], colour: 'red' });
    expect(response.statusCode).toBe(422);
    const { error } = response.json();
    expect(error.type).toBe('invalid_request');
    expect(error.fields).toEqual(
      expect.arrayContaining([
        { in: 'body', field: 'user_id', message: 'is required' },
        { in: 'body', field: 'ttl_seconds', message: 'must be >= 60' },
        { in: 'body', field: 'tags.1', message: 'must NOT have more than 3 characters' },
        { in: 'body', field: 'colour', message: 'is not a known field' },
      ]),
    );
    expect(error.fields.some((f: { field: string }) => f.field === 'kind')).toBe(true);
    expect(error.message).toMatch(/^Invalid request: /);
    expect(response.headers['x-svc-cost-usd']).toBe('0.000000');
  });

  it('name the first 100 failing fields, and how many more there were', async () => {
    const response = await post({ user_id: 'u', tags: Array.from({ length: 150 }, () => 'toolong') });
    expect(response.statusCode).toBe(422);
    const { error } = response.json();
    expect(error.fields).toHaveLength(100);
    expect(error.fields[99]).toEqual({
      in: 'body',
      field: 'tags.99',
      message: 'must NOT have more than 3 characters',
    });
    expect(error.message).toMatch(/; and 50 more$/);
  });

  // Listing every error of a megabyte of them took seconds of the process and answered 97 MB.
  it(`name only the first failing field of input over ${ALL_ERRORS_MAX_VALUES} values`, async () => {
    const tags = (length: number) => Array.from({ length }, () => 'toolong');
    // The body holds its object, user_id and the array: the tags make up the rest.
    const atTheLimit = await post({ user_id: 'u', tags: tags(ALL_ERRORS_MAX_VALUES - 3) });
    expect(atTheLimit.json().error.fields).toHaveLength(100);
    const overIt = await post({ user_id: 'u', tags: tags(ALL_ERRORS_MAX_VALUES - 2) });
    expect(overIt.statusCode).toBe(422);
    expect(overIt.json().error.fields).toEqual([
      { in: 'body', field: 'tags.0', message: 'must NOT have more than 3 characters' },
    ]);
    const flood = await post({ user_id: 'u', tags: tags(90_000) });
    expect(flood.json().error.fields).toHaveLength(1);
    expect(flood.body.length).toBeLessThan(1_000);
  });

  it('accept the limits themselves', async () => {
    for (const ttl of [60, 86_400]) {
      expect((await post({ user_id: 'u', ttl_seconds: ttl })).statusCode).toBe(200);
    }
    expect((await post({ user_id: 'u', ttl_seconds: 86_401 })).json().error.fields).toEqual([
      { in: 'body', field: 'ttl_seconds', message: 'must be <= 86400' },
    ]);
  });

  it('name query and path fields by where they were sent', async () => {
    const query = await post({ user_id: 'u' }, '/test/validated/abc?limit=101');
    expect(query.statusCode).toBe(422);
    expect(query.json().error.fields).toEqual([{ in: 'query', field: 'limit', message: 'must be <= 100' }]);
    const path = await post({ user_id: 'u' }, '/test/validated/ABC');
    expect(path.statusCode).toBe(422);
    expect(path.json().error.fields[0]).toMatchObject({ in: 'path', field: 'id' });
  });

  it('include a body that is not JSON at all', async () => {
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/test/validated/abc',
      headers: { 'content-type': 'application/json' },
      payload: '{"user_id": ',
    });
    expect(response.statusCode).toBe(422);
    expect(response.json().error.type).toBe('invalid_request');
  });
});

describe('text', () => {
  const raw = (payload: string) =>
    ctx.app.inject({
      method: 'POST',
      url: '/test/validated/abc',
      headers: { 'content-type': 'application/json' },
      payload,
    });

  it('with half a character (a lone UTF-16 surrogate) is refused, naming where it is', async () => {
    // What a client sends that cut text at a UTF-16 length inside an emoji: PostgreSQL's jsonb refuses
    // it (a 500), its text columns turn it into U+FFFD (not what was sent).
    for (const [payload, field] of [
      ['{"user_id": "half \\ud83d"}', 'user_id'],
      ['{"user_id": "u", "tags": ["ok", "\\ude00x"]}', 'tags.1'],
      ['{"user_id": "u", "\\ud83d": 1}', '\ud83d'],
    ] as const) {
      const response = await raw(payload);
      expect(response.statusCode, payload).toBe(422);
      expect(response.json().error.fields).toEqual([expect.objectContaining({ in: 'body', field })]);
    }
  });

  it('with whole characters escaped as surrogate pairs is taken as sent', async () => {
    // An escaped backslash before "ud800" is text, not an escape.
    const response = await raw('{"user_id": "smile \\ud83d\\ude00 \\\\ud800"}');
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json().body).toEqual({ user_id: 'smile 😀 \\ud800' });
  });
});

describe('types', () => {
  it('of a body of optional fields: left out reads as {}, null or a list is refused', async () => {
    const { token } = await createCustomer(ctx.container);
    const send = (payload?: string) =>
      ctx.app.inject({
        method: 'PATCH',
        url: '/v1/realtime/app',
        headers: {
          authorization: `Bearer ${token}`,
          ...(payload ? { 'content-type': 'application/json' } : {}),
        },
        remoteAddress: uniqueAddress(),
        ...(payload ? { payload } : {}),
      });
    expect((await send()).statusCode).toBe(200);
    for (const payload of ['null', '[]', '"x"']) expect((await send(payload)).statusCode, payload).toBe(422);
  });

  it('are taken as sent in a JSON body: nothing is coerced', async () => {
    for (const [body, field] of [
      [{ user_id: ['a'] }, 'user_id'],
      [{ user_id: true }, 'user_id'],
      [{ user_id: 7 }, 'user_id'],
      [{ user_id: 'u', ttl_seconds: true }, 'ttl_seconds'],
      [{ user_id: 'u', ttl_seconds: '600' }, 'ttl_seconds'],
      [{ user_id: 'u', ttl_seconds: null }, 'ttl_seconds'],
      [{ user_id: 'u', tags: 'ok' }, 'tags'],
    ] as const) {
      const response = await post(body);
      expect({ body, status: response.statusCode }).toEqual({ body, status: 422 });
      expect(response.json().error.fields).toContainEqual(expect.objectContaining({ in: 'body', field }));
    }
  });

  it('of query numbers are parsed from plain digits only', async () => {
    for (const limit of ['1e1', '0x10', '%2010', '10.0', '010', '']) {
      const response = await post({ user_id: 'u' }, `/test/validated/abc?limit=${limit}`);
      expect({ limit, status: response.statusCode }).toEqual({ limit, status: 422 });
      expect(response.json().error.fields).toEqual([
        { in: 'query', field: 'limit', message: 'must be a whole number in digits' },
      ]);
    }
    const plain = await post({ user_id: 'u' }, '/test/validated/abc?limit=10');
    expect(plain.statusCode).toBe(200);
  });

  it('are strict on the real endpoints too', async () => {
    const { token } = await createCustomer(ctx.container);
    const headers = { authorization: `Bearer ${token}` };
    const usage = await ctx.app.inject({ method: 'GET', url: '/v1/realtime/usage?days=1e1', headers });
    expect(usage.statusCode).toBe(422);
    expect(usage.json().error.fields).toEqual([
      { in: 'query', field: 'days', message: 'must be a whole number in digits' },
    ]);
    const live = await ctx.app.inject({
      method: 'POST',
      url: '/v1/realtime/live/tokens',
      headers,
      payload: { room: 'r', identity: 'i', publish: null },
    });
    expect(live.statusCode).toBe(422);
    expect(live.json().error.fields).toContainEqual(
      expect.objectContaining({ in: 'body', field: 'publish' }),
    );
  });
});

describe('requests fastify itself refuses', () => {
  const expectSpec422 = (response: { statusCode: number; json: () => unknown }, message: RegExp) => {
    expect(response.statusCode).toBe(422);
    expect(response.json()).toEqual({
      error: { type: 'invalid_request', message: expect.stringMatching(message) },
    });
  };

  it('answer 422 with the spec error body: an unsupported content type', async () => {
    const response = await ctx.app.inject({
      method: 'POST',
      url: '/test/validated/abc',
      headers: { 'content-type': 'application/xml' },
      payload: '<user_id>u</user_id>',
    });
    expectSpec422(response, /content type.*application\/json/);
  });

  it('answer 422 with the spec error body: a body over the limit', async () => {
    const response = await post({ user_id: 'u'.repeat(1_100_000) });
    expectSpec422(response, /over the 1 MiB limit/);
  });

  it('answer 422 with the spec error body: a path parameter over its length', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: `/v1/storage/objects/${'o'.repeat(300)}` });
    expectSpec422(response, /.+/);
  });
});

describe('server errors', () => {
  it('answer 500 with the error body and a request id, never the internals', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: '/test/crash' });
    expect(response.statusCode).toBe(500);
    const body = response.json();
    expect(body).toEqual({
      error: {
        type: 'api_error',
        message: `Internal server error; quote request id ${response.headers['x-request-id']} when reporting it`,
      },
    });
    expect(response.body).not.toMatch(/10\.0\.0\.7|password|svc"/);
    expect(response.headers['x-svc-cost-usd']).toBe('0.000000');
  });
});

describe('a stalled PostgreSQL', () => {
  it('is a 503 to retry once the statement timeout cancels the query, not a 500', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: '/test/stalled' });
    expect(response.statusCode).toBe(503);
    expect(response.headers['retry-after']).toBe('1');
    expect(response.json()).toEqual({
      error: { type: 'service_unavailable', message: 'PostgreSQL is unavailable; try again shortly' },
    });
  });
});

describe('unknown routes', () => {
  it('answer 404 with the spec error body and the cost header', async () => {
    const response = await ctx.app.inject({ method: 'GET', url: '/v1/nothing-here?x=1' });
    expect(response.statusCode).toBe(404);
    expect(response.json()).toEqual({
      error: { type: 'not_found', message: 'Route GET /v1/nothing-here not found' },
    });
    expect(response.headers['x-svc-cost-usd']).toBe('0.000000');
  });

  it('answer 405 with Allow where the path exists with other methods', async () => {
    const balance = await ctx.app.inject({ method: 'PATCH', url: '/v1/realtime/balance' });
    expect(balance.statusCode).toBe(405);
    expect(balance.headers.allow).toBe('GET');
    expect(balance.json()).toEqual({
      error: { type: 'method_not_allowed', message: '/v1/realtime/balance does not take PATCH: use GET' },
    });
    // A path parameter matches one segment: a declared static path beside it keeps its own methods.
    const object = await ctx.app.inject({ method: 'PUT', url: '/v1/storage/objects/obj_x?y=1' });
    expect(object.statusCode).toBe(405);
    expect(object.headers.allow).toBe('DELETE, GET');
    // A path declared as such names its own resource, not one of a parameter's values beside it.
    const usage = await ctx.app.inject({ method: 'OPTIONS', url: '/v1/orgs/usage' });
    expect(usage.headers.allow).toBe('GET');
    const deeper = await ctx.app.inject({ method: 'PUT', url: '/v1/storage/objects/obj_x/nothing' });
    expect(deeper.statusCode).toBe(404);
    // Methods no route takes are answered before any body is read.
    for (const method of ['QUERY', 'TRACE'] as const) {
      const odd = await ctx.app.inject({ method, url: '/v1/realtime/balance' } as never);
      expect(odd.statusCode, method).toBe(405);
      expect(odd.json().error.type).toBe('method_not_allowed');
    }
  });
});

describe('request ids', () => {
  it('keep a sane caller id and replace anything else', async () => {
    const kept = await ctx.app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'abc-123' },
    });
    expect(kept.headers['x-request-id']).toBe('abc-123');
    const replaced = await ctx.app.inject({
      method: 'GET',
      url: '/healthz',
      headers: { 'x-request-id': 'a b<c>' },
    });
    expect(replaced.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});
