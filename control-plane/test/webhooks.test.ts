/**
 * Webhooks against the real PostgreSQL and real HTTP receivers on loopback. The apps here run on a
 * clock ten years ahead (`clockYearsAhead`), so that these tests alone decide which worker sends
 * what, and when retries fall due.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { type DatabasePool, type Interceptor, sql } from 'slonik';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RETRY_DELAYS_SECONDS, RETRY_JITTER } from '../src/modules/webhooks/schema.js';
import { type Claim, webhooksStore } from '../src/modules/webhooks/store.js';
import { parseUsd } from '../src/platform/money.js';
import { DeliveriesMade, type EventInput } from '../src/platform/outbox.js';
import { inTransaction } from '../src/platform/transaction.js';
import {
  callWithKey,
  clockYearsAhead,
  createCustomer,
  meterNow,
  startTestApp,
  type TestContext,
} from './support.js';
import { type Answer, type ReceivedRequest, type Receiver, startReceiver } from './webhook-receiver.js';

const futureClock = () => clockYearsAhead(10);

let ctx: TestContext;
const receivers: Receiver[] = [];
const contexts: TestContext[] = [];

/** Run once right after the next read of an endpoint by its id, before the operation goes on. */
let afterEndpointRead: (() => Promise<unknown>) | null = null;
const endpointRead: Interceptor = {
  name: 'after-endpoint-read',
  afterQueryExecution: async (_context, query) => {
    const then = afterEndpointRead;
    if (then && /from webhook_endpoints\s+where id =/.test(query.sql)) {
      afterEndpointRead = null;
      await then();
    }
    return null;
  },
};

beforeAll(async () => {
  ctx = await startTestApp({ clock: futureClock(), interceptors: [endpointRead] });
});
afterAll(async () => {
  await Promise.all([...receivers.map((r) => r.close()), ...contexts.map((c) => c.close())]);
  await ctx.close();
});

async function receiver(answer?: (request: ReceivedRequest, index: number) => Answer) {
  const started = await startReceiver(answer);
  receivers.push(started);
  return started;
}

type Endpoint = { id: string; secret: string; url: string; enabled: boolean; disabled_reason: string | null };

async function customerWithEndpoint(
  url: string,
  body: Record<string, unknown> = {},
  options: { mode?: 'test' | 'live'; balanceMicros?: number; on?: TestContext } = {},
) {
  const on = options.on ?? ctx;
  const customer = await createCustomer(on.container, {
    mode: options.mode ?? 'test',
    ...(options.balanceMicros ? { balanceMicros: options.balanceMicros } : {}),
  });
  const created = await callWithKey(on.app, customer.token, 'POST', '/v1/webhooks', {
    url,
    event_types: ['buzz.created'],
    ...body,
  });
  expect(created.statusCode, created.body).toBe(201);
  return { customer, endpoint: created.json<Endpoint>() };
}

function emit(on: TestContext, event: Partial<EventInput> & { appId: string }) {
  return inTransaction(on.container.pool, (tx) =>
    on.container.outbox.emit(tx, { mode: 'test', type: 'buzz.created', data: { id: 'bz_1' }, ...event }),
  );
}

/** Claims the deliveries due at `now`, for 30 s, as another replica's worker would. */
const claimDue = (pool: DatabasePool, now: Date, start = '') =>
  inTransaction(pool, (tx) =>
    webhooksStore(tx).claimDue({
      now,
      claimUntil: new Date(now.getTime() + 30_000),
      limit: 1_000,
      rooms: new Map(),
      unseenRoom: 10,
      skip: [],
      start,
    }),
  );

/**
 * An app on a clock `yearsAhead` of its own (no other test's delivery is due there), with an endpoint
 * and one event emitted to it; `claim` claims due deliveries as a worker would and answers the claim
 * of that event's delivery, if it took it (an earlier run of the same test may have left some due).
 */
async function withOneDelivery(yearsAhead: number) {
  const own = await startTestApp({ clock: clockYearsAhead(yearsAhead) });
  contexts.push(own);
  const hook = await receiver();
  const { customer, endpoint } = await customerWithEndpoint(hook.url, {}, { on: own });
  const {
    deliveryIds: [deliveryId],
  } = await emit(own, { appId: customer.app.id });
  const claim = (now: Date, start = '') =>
    claimDue(own.container.pool, now, start).then((rows) => rows.find((row) => row.id === deliveryId));
  return { own, hook, customer, endpoint, deliveryId: deliveryId!, claim };
}

/** A successful attempt of a claim, as the worker records it. */
const successOf = (claim: Claim, endpointId: string, at: Date) => ({
  claim,
  endpointId,
  at,
  statusCode: 200,
  latencyMs: 1,
  excerpt: '',
});

/**
 * Starts recording `success` while the transaction of backend `pid` holds what the record needs;
 * answers the record (wrapped, not awaited) once it waits for that transaction.
 */
async function recordBehind(
  pool: DatabasePool,
  pid: number,
  what: string,
  success: ReturnType<typeof successOf>,
) {
  const recording = webhooksStore(pool).recordSuccesses([success]);
  const waiting = sql.type(z.object({ waiting: z.number() }))`
    select count(*)::int as waiting from pg_stat_activity where ${pid} = any(pg_blocking_pids(pid))`;
  for (let tries = 0; (await pool.oneFirst(waiting)) === 0; tries += 1) {
    if (tries > 100) throw new Error(`the record never waited for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { recording };
}

const specSignature = (secret: string, body: string) =>
  `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

function hasSpecSignature(request: ReceivedRequest, secret: string): boolean {
  const expected = Buffer.from(specSignature(secret, request.body));
  const given = Buffer.from(String(request.headers['x-svc-signature']));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

describe('webhook endpoints', () => {
  it('are created with a secret shown once, read, listed a page at a time, changed and deleted', async () => {
    const { customer, endpoint } = await customerWithEndpoint('https://hooks.example.com/in', {
      description: 'orders',
    });
    expect(endpoint.secret).toMatch(/^whsec_/);
    expect(endpoint).toMatchObject({ enabled: true, disabled_reason: null });
    const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
      callWithKey(ctx.app, customer.token, method, url, payload);

    const read = (await call('GET', `/v1/webhooks/${endpoint.id}`)).json();
    expect(read).not.toHaveProperty('secret');
    expect(read.secret_hint).toBe(`whsec_…${endpoint.secret.slice(-4)}`);

    const second = (
      await call('POST', '/v1/webhooks', { url: 'https://b.example.com/', event_types: ['ping'] })
    ).statusCode;
    expect(second).toBe(422);
    ctx.clock.advance(1_000);
    const newer = await call('POST', '/v1/webhooks', {
      url: 'https://b.example.com/',
      event_types: ['balance.low'],
    });
    const first = (await call('GET', '/v1/webhooks?limit=1')).json();
    expect(first.items.map((e: Endpoint) => e.id)).toEqual([newer.json().id]);
    const rest = (await call('GET', `/v1/webhooks?limit=1&cursor=${first.next_cursor}`)).json();
    expect(rest.items.map((e: Endpoint) => e.id)).toEqual([endpoint.id]);
    expect(rest.next_cursor).toBeNull();
    expect((await call('GET', '/v1/webhooks?limit=101')).statusCode).toBe(422);
    expect((await call('GET', '/v1/webhooks?limit=100')).statusCode).toBe(200);

    const changed = await call('PATCH', `/v1/webhooks/${endpoint.id}`, {
      enabled: false,
      event_types: ['buzz.created', 'follow.created'],
      profile_ids: ['Ana@example.com'],
    });
    expect(changed.json()).toMatchObject({
      enabled: false,
      event_types: ['buzz.created', 'follow.created'],
      profile_ids: ['Ana@example.com'],
      description: 'orders',
    });
    expect(
      (await call('PATCH', `/v1/webhooks/${endpoint.id}`, { profile_ids: null })).json().profile_ids,
    ).toBeNull();
    expect((await call('DELETE', `/v1/webhooks/${endpoint.id}`)).json()).toEqual({
      ok: true,
      id: endpoint.id,
    });
    expect((await call('GET', `/v1/webhooks/${endpoint.id}`)).statusCode).toBe(404);
  });

  it('are changed in the fields given only: the service disabling one meanwhile holds', async () => {
    const { customer, endpoint } = await customerWithEndpoint('https://hooks.example.com/in');
    // The delivery worker disables it between the change's read and its write.
    afterEndpointRead = () =>
      ctx.container.pool.query(sql.unsafe`
        update webhook_endpoints set enabled = false, disabled_reason = 'failing' where id = ${endpoint.id}`);
    const changed = await callWithKey(ctx.app, customer.token, 'PATCH', `/v1/webhooks/${endpoint.id}`, {
      description: 'renamed',
    });
    expect(afterEndpointRead).toBeNull();
    expect(changed.json()).toMatchObject({
      description: 'renamed',
      enabled: false,
      disabled_reason: 'failing',
    });
  });

  it("are the app's and the key mode's own: another app or mode finds nothing", async () => {
    const { customer, endpoint } = await customerWithEndpoint('https://hooks.example.com/in');
    const other = await createCustomer(ctx.container);
    const live = await ctx.container.accounts.createKey({
      appId: customer.app.id,
      kind: 'secret',
      mode: 'live',
    });
    for (const token of [other.token, live.token]) {
      expect((await callWithKey(ctx.app, token, 'GET', `/v1/webhooks/${endpoint.id}`)).statusCode).toBe(404);
      expect((await callWithKey(ctx.app, token, 'DELETE', `/v1/webhooks/${endpoint.id}`)).statusCode).toBe(
        404,
      );
      expect((await callWithKey(ctx.app, token, 'GET', '/v1/webhooks')).json().items).toEqual([]);
    }
  });

  it('take https:// only, http:// for test keys where allowed, and no private address or credentials', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live' });
    const create = (url: string, token = customer.token) =>
      callWithKey(ctx.app, token, 'POST', '/v1/webhooks', { url, event_types: ['buzz.created'] });
    const refusal = async (url: string, token?: string) => {
      const response = await create(url, token);
      expect(response.statusCode, url).toBe(422);
      return response.json().error.fields[0];
    };
    expect((await refusal('http://hooks.example.com/')).message).toMatch(/https/);
    expect((await refusal('ftp://hooks.example.com/')).field).toBe('url');
    expect((await refusal('https://user:pw@hooks.example.com/')).message).toMatch(/password/);
    expect((await refusal('not a url')).message).toMatch(/absolute/);
    expect((await refusal('https://hooks.example.com/#x')).message).toMatch(/fragment/);
    const testKey = await createCustomer(ctx.container);
    expect((await create('http://hooks.example.com/', testKey.token)).statusCode).toBe(201);

    const strict = await startTestApp({
      clock: futureClock(),
      settings: { SVC_WEBHOOK_ALLOWED_NETWORKS: '', SVC_WEBHOOK_ALLOW_HTTP: false },
    });
    contexts.push(strict);
    const strictCustomer = await createCustomer(strict.container);
    for (const url of [
      'https://127.0.0.1/',
      'https://10.0.0.7/',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/',
    ]) {
      const response = await callWithKey(strict.app, strictCustomer.token, 'POST', '/v1/webhooks', {
        url,
        event_types: ['buzz.created'],
      });
      expect(response.statusCode, url).toBe(422);
      expect(response.json().error.fields[0].message).toMatch(/private/);
    }
    const plain = await callWithKey(strict.app, strictCustomer.token, 'POST', '/v1/webhooks', {
      url: 'http://hooks.example.com/',
      event_types: ['buzz.created'],
    });
    expect(plain.statusCode).toBe(422);
  });

  it('are at most 20 per app and mode', async () => {
    const { customer } = await customerWithEndpoint('https://hooks.example.com/0');
    for (let i = 1; i < 20; i += 1) {
      const response = await callWithKey(ctx.app, customer.token, 'POST', '/v1/webhooks', {
        url: `https://hooks.example.com/${i}`,
        event_types: ['buzz.created'],
      });
      expect(response.statusCode).toBe(201);
    }
    const over = await callWithKey(ctx.app, customer.token, 'POST', '/v1/webhooks', {
      url: 'https://hooks.example.com/20',
      event_types: ['buzz.created'],
    });
    expect(over.statusCode).toBe(403);
    expect(over.json().error.message).toMatch(/20/);
  });
});

describe('webhook deliveries', () => {
  it('sign the raw body both ways, so Node crypto and the standardwebhooks package verify it', async () => {
    // A clock at the real time: Standard Webhooks verifiers refuse timestamps far from now.
    const now = await startTestApp();
    contexts.push(now);
    const hook = await receiver();
    const { customer, endpoint } = await customerWithEndpoint(hook.url, {}, { on: now });
    const event = await emit(now, { appId: customer.app.id });
    await now.container.webhookDelivery.deliverDue();
    // The test stack's control plane may have taken it first: either way it arrives once, signed.
    const [request] = await hook.waitFor(1);
    expect(request!.eventId).toBe(event.id);
    expect(hasSpecSignature(request!, endpoint.secret)).toBe(true);
    expect(
      new Webhook(endpoint.secret).verify(request!.body, request!.headers as Record<string, string>),
    ).toMatchObject({
      id: event.id,
      type: 'buzz.created',
      app_id: customer.app.id,
      mode: 'test',
      data: { id: 'bz_1' },
    });
    expect(request!.headers['webhook-id']).toBe(event.id);
    expect(request!.headers['content-type']).toBe('application/json');
  });

  it('are signed with a rotated secret at once: the old secret verifies nothing more', async () => {
    const hook = await receiver();
    const { customer, endpoint } = await customerWithEndpoint(hook.url);
    await emit(ctx, { appId: customer.app.id });
    const rotated = (
      await callWithKey(ctx.app, customer.token, 'POST', `/v1/webhooks/${endpoint.id}/rotate`)
    ).json<Endpoint>();
    expect(rotated.secret).not.toBe(endpoint.secret);
    await ctx.container.webhookDelivery.deliverDue();
    const [request] = await hook.waitFor(1);
    expect(hasSpecSignature(request!, rotated.secret)).toBe(true);
    expect(hasSpecSignature(request!, endpoint.secret)).toBe(false);
  });

  it('are retried after a 500 with the same event id and body, then succeed', async () => {
    const hook = await receiver((_request, index) => ({ status: index === 0 ? 500 : 200, body: 'busy' }));
    const { customer, endpoint } = await customerWithEndpoint(hook.url);
    const event = await emit(ctx, { appId: customer.app.id });
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(1);
    const deliveries = (
      await callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}/deliveries`)
    ).json();
    expect(deliveries.items[0]).toMatchObject({
      event_id: event.id,
      status: 'pending',
      attempts: 1,
      last_attempt: { status_code: 500, failure: null, response_excerpt: 'busy' },
    });
    // Not due before its first retry delay (5 s, ±20%), due after it.
    ctx.clock.advance(3_000);
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(1);
    ctx.clock.advance(3_000);
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(2);
    expect(hook.received[1]!.body).toBe(hook.received[0]!.body);
    expect(hook.received[1]!.headers['webhook-id']).toBe(event.id);
    const delivery = (
      await callWithKey(
        ctx.app,
        customer.token,
        'GET',
        `/v1/webhooks/${endpoint.id}/deliveries/${deliveries.items[0].id}`,
      )
    ).json();
    expect(delivery).toMatchObject({ status: 'succeeded', attempts: 2, next_attempt_at: null });
    expect(delivery.attempt_log.map((a: { status_code: number }) => a.status_code)).toEqual([200, 500]);
  });

  it('are not sent once their claim has too little room left: another replica may hold them by then', async () => {
    const hook = await receiver();
    const { customer, endpoint } = await customerWithEndpoint(hook.url);
    const event = await emit(ctx, { appId: customer.app.id });
    // The endpoint lookup waits (a busy pool) past the claim's lapse, and another replica claims the
    // delivery meanwhile.
    let claimedByOther: string[] = [];
    afterEndpointRead = async () => {
      ctx.clock.advance(30_001);
      claimedByOther = (await claimDue(ctx.container.pool, ctx.clock.now())).map((row) => row.id);
    };
    await ctx.container.webhookDelivery.deliverDue();
    expect(afterEndpointRead).toBeNull();
    const [delivery] = (
      await callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}/deliveries`)
    ).json().items;
    expect(claimedByOther).toContain(delivery.id);
    // Only the replica holding the claim sends it: this one gave it back, which left the claim alone.
    expect(hook.received).toHaveLength(0);
    expect(delivery).toMatchObject({ event_id: event.id, status: 'pending', attempts: 0 });
  });

  it('count an answer later than 5 seconds as a timeout, and retry it', async () => {
    const hook = await receiver((_request, index) => ({ status: 200, delayMs: index === 0 ? 6_000 : 0 }));
    const { customer, endpoint } = await customerWithEndpoint(hook.url);
    await emit(ctx, { appId: customer.app.id });
    await ctx.container.webhookDelivery.deliverDue();
    const [first] = (
      await callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}/deliveries`)
    ).json().items;
    expect(first).toMatchObject({
      status: 'pending',
      last_attempt: { failure: 'timeout', status_code: null },
    });
    expect(first.last_attempt.latency_ms).toBeGreaterThanOrEqual(5_000);
    expect(first.last_attempt.latency_ms).toBeLessThan(6_000);
    ctx.clock.advance(6_000);
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(2);
  }, 20_000);

  it('never follow a redirect', async () => {
    const elsewhere = await receiver();
    const hook = await receiver(() => ({ status: 302, headers: { location: elsewhere.url } }));
    const { customer, endpoint } = await customerWithEndpoint(hook.url);
    await emit(ctx, { appId: customer.app.id });
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(1);
    expect(elsewhere.received).toHaveLength(0);
    const [delivery] = (
      await callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}/deliveries`)
    ).json().items;
    expect(delivery).toMatchObject({ status: 'pending', last_attempt: { status_code: 302 } });
  });

  it('refuse a name that resolves to a loopback address at delivery time, unless allow-listed', async () => {
    const strict = await startTestApp({
      clock: futureClock(),
      settings: { SVC_WEBHOOK_ALLOWED_NETWORKS: '' },
    });
    contexts.push(strict);
    const hook = await receiver();
    const url = `http://localhost:${hook.port}/hook`;
    const { customer, endpoint } = await customerWithEndpoint(url, {}, { on: strict });
    await emit(strict, { appId: customer.app.id });
    await strict.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(0);
    const [delivery] = (
      await callWithKey(strict.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}/deliveries`)
    ).json().items;
    expect(delivery.last_attempt).toMatchObject({ failure: 'forbidden-address', status_code: null });
    // The app is not told where the operator's DNS points.
    expect(delivery.last_attempt.response_excerpt).not.toMatch(/127\.0\.0\.1|::1/);
    // Its retry is not for the allow-listed app's worker to send.
    await callWithKey(strict.app, customer.token, 'DELETE', `/v1/webhooks/${endpoint.id}`);
    // The allow-listed app (loopback, as the test stack's) delivers to the same URL.
    const allowed = await customerWithEndpoint(url);
    await emit(ctx, { appId: allowed.customer.app.id });
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(1);
  });

  it("keep a receiver's answer that holds a NUL character (PostgreSQL text cannot)", async () => {
    const hook = await receiver(() => ({ status: 200, body: 'ok\u0000done' }));
    const { customer, endpoint } = await customerWithEndpoint(hook.url);
    await emit(ctx, { appId: customer.app.id });
    await ctx.container.webhookDelivery.deliverDue();
    const [delivery] = (
      await callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}/deliveries`)
    ).json().items;
    expect(delivery).toMatchObject({
      status: 'succeeded',
      last_attempt: { response_excerpt: 'ok\uFFFDdone' },
    });
  });

  it('are failed attempts, not sent, when the secret no longer opens or plain http was turned off', async () => {
    const hook = await receiver();
    const { customer, endpoint } = await customerWithEndpoint(hook.url);
    const rekeyed = await startTestApp({
      clock: futureClock(),
      settings: { SVC_SEALING_KEY: 'another-sealing-key-of-enough-length-7f3a9c2e1b' },
    });
    const noHttp = await startTestApp({ clock: futureClock(), settings: { SVC_WEBHOOK_ALLOW_HTTP: false } });
    contexts.push(rekeyed, noHttp);
    const lastAttempt = async () =>
      (await callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}/deliveries`)).json()
        .items[0].last_attempt;
    await emit(ctx, { appId: customer.app.id });
    rekeyed.clock.set(ctx.clock.now());
    await rekeyed.container.webhookDelivery.deliverDue();
    expect(await lastAttempt()).toMatchObject({ failure: 'secret-unavailable', status_code: null });
    ctx.clock.advance(10_000);
    noHttp.clock.set(ctx.clock.now());
    await noHttp.container.webhookDelivery.deliverDue();
    expect(await lastAttempt()).toMatchObject({ failure: 'invalid-url' });
    expect(hook.received).toHaveLength(0);
    // A rotation under the new key makes the endpoint work for that control plane.
    await callWithKey(rekeyed.app, customer.token, 'POST', `/v1/webhooks/${endpoint.id}/rotate`);
    rekeyed.clock.set(new Date(ctx.clock.now().getTime() + 60_000));
    await rekeyed.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(1);
  });

  it('go to the endpoints that want the event, in its mode, and the profiles they chose', async () => {
    const hook = await receiver();
    const { customer, endpoint } = await customerWithEndpoint(hook.url, {
      event_types: ['buzz.created', 'follow.created'],
      profile_ids: ['ana'],
    });
    await emit(ctx, { appId: customer.app.id, profileId: 'ana', data: { n: 1 } });
    await emit(ctx, { appId: customer.app.id, profileId: 'bo', data: { n: 2 } });
    await emit(ctx, { appId: customer.app.id, type: 'sip.created', profileId: 'ana', data: { n: 3 } });
    await emit(ctx, { appId: customer.app.id, mode: 'live', profileId: 'ana', data: { n: 4 } });
    await emit(ctx, { appId: customer.app.id, type: 'message.received', data: { n: 5 } });
    await callWithKey(ctx.app, customer.token, 'PATCH', `/v1/webhooks/${endpoint.id}`, {
      event_types: ['buzz.created', 'message.received'],
    });
    await emit(ctx, { appId: customer.app.id, type: 'message.received', data: { n: 6 } });
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received.map((r) => JSON.parse(r.body).data.n).sort()).toEqual([1, 6]);
    // The events no endpoint wanted were not kept.
    const kept = await ctx.container.pool.anyFirst(
      sql.unsafe`select body from webhook_events where app_id = ${customer.app.id}`,
    );
    expect(kept.map((body) => JSON.parse(body as string).data.n).sort()).toEqual([1, 6]);
  });

  it("carry what only the change's own statement knows, as JSON, and nothing for a change not made", async () => {
    const hook = await receiver();
    const { customer } = await customerWithEndpoint(hook.url);
    const { outbox } = ctx.container;
    const text = 'a "quote", a \\ backslash, a\nnew line, é, 😀 and </script>';
    const inChange = (made: boolean) =>
      inTransaction(ctx.container.pool, async (tx) => {
        const event = outbox.inStatement({
          appId: customer.app.id,
          mode: 'test',
          type: 'buzz.created',
          data: { text: outbox.hole('text'), made },
        });
        const parts = event.over('change', { text: sql.fragment`change.text` });
        const { deliveries } = await tx.one(sql.type(DeliveriesMade)`
          with change as (select ${text}::text as text where ${made}), ${parts.ctes}
          select ${parts.deliveries} as deliveries`);
        event.made(tx, deliveries);
        return deliveries;
      });
    expect(await inChange(false)).toBe(0);
    expect(await inChange(true)).toBe(1);
    // A hole left unfilled, or a fill without its hole, is a mistake in the code, never sent.
    const holed = outbox.inStatement({
      appId: customer.app.id,
      mode: 'test',
      type: 'buzz.created',
      data: { text: outbox.hole('text') },
    });
    expect(() => holed.over('change')).toThrow(/holes and fills differ/);
    expect(() => holed.over('change', { other: sql.fragment`change.text` })).toThrow(
      /holes and fills differ/,
    );
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received.map((r) => JSON.parse(r.body).data)).toEqual([{ text, made: true }]);
  });

  it('are recorded with the change or not at all (the transactional outbox)', async () => {
    const hook = await receiver();
    const { customer } = await customerWithEndpoint(hook.url);
    await expect(
      inTransaction(ctx.container.pool, async (tx) => {
        await ctx.container.outbox.emit(tx, {
          appId: customer.app.id,
          mode: 'test',
          type: 'buzz.created',
          data: {},
        });
        throw new Error('the change failed');
      }),
    ).rejects.toThrow('the change failed');
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(0);
  });

  it('send the test ping, to a disabled endpoint too, and redeliver a delivery with the same event', async () => {
    const hook = await receiver();
    const { customer, endpoint } = await customerWithEndpoint(hook.url, { enabled: false });
    const call = (method: 'GET' | 'POST', url: string) => callWithKey(ctx.app, customer.token, method, url);
    const tested = await call('POST', `/v1/webhooks/${endpoint.id}/test`);
    expect(tested.statusCode).toBe(201);
    expect(tested.json()).toMatchObject({
      event_type: 'ping',
      status: 'pending',
      attempts: 0,
      last_attempt: null,
    });
    // A disabled endpoint's other deliveries wait for it to be enabled.
    await emit(ctx, { appId: customer.app.id });
    await ctx.container.outbox.announceDue();
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received.map((r) => JSON.parse(r.body).type)).toEqual(['ping']);
    expect(JSON.parse(hook.received[0]!.body).data).toEqual({ endpoint_id: endpoint.id });

    const again = await call('POST', `/v1/webhooks/${endpoint.id}/deliveries/${tested.json().id}/redeliver`);
    expect(again.json()).toMatchObject({ status: 'pending', attempts: 1 });
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(2);
    expect(hook.received[1]!.eventId).toBe(hook.received[0]!.eventId);
    expect((await call('GET', `/v1/webhooks/${endpoint.id}/deliveries/nope`)).statusCode).toBe(404);
  });

  it('fail for good after the retry schedule, and an endpoint failing for five days is disabled and its app told', async () => {
    const down = await receiver(() => ({ status: 503 }));
    const watcher = await receiver();
    const { customer, endpoint } = await customerWithEndpoint(down.url);
    const deliveries = (query: string) =>
      callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}/deliveries?${query}`);
    await callWithKey(ctx.app, customer.token, 'POST', '/v1/webhooks', {
      url: watcher.url,
      event_types: ['webhook_endpoint.disabled'],
    });
    await emit(ctx, { appId: customer.app.id });
    // Fifteen attempts over about three days, each retry at the end of its delay's jitter.
    await ctx.container.webhookDelivery.deliverDue();
    for (const delay of RETRY_DELAYS_SECONDS) {
      ctx.clock.advance(delay * 1_000 * (1 + RETRY_JITTER));
      await ctx.container.webhookDelivery.deliverDue();
    }
    expect(down.received).toHaveLength(15);
    const [failed] = (await deliveries('status=failed')).json().items;
    expect(failed).toMatchObject({ status: 'failed', attempts: 15, next_attempt_at: null });
    expect(
      (await callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}`)).json(),
    ).toMatchObject({
      enabled: true,
    });
    // Still failing two days later, five days after its first failure: disabled, and the app told.
    ctx.clock.advance(2 * 86_400_000);
    await emit(ctx, { appId: customer.app.id });
    await ctx.container.webhookDelivery.deliverDue();
    const disabled = (
      await callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}`)
    ).json();
    expect(disabled).toMatchObject({ enabled: false, disabled_reason: 'failing' });
    await ctx.container.webhookDelivery.deliverDue();
    const told = watcher.received.map((r) => JSON.parse(r.body));
    expect(told).toHaveLength(1);
    expect(told[0]).toMatchObject({
      type: 'webhook_endpoint.disabled',
      data: { reason: 'failing', endpoint: { id: endpoint.id } },
    });
    // Its waiting delivery goes once it is enabled again, which also clears the reason and the streak.
    const enabled = await callWithKey(ctx.app, customer.token, 'PATCH', `/v1/webhooks/${endpoint.id}`, {
      enabled: true,
    });
    expect(enabled.json()).toMatchObject({ enabled: true, disabled_reason: null, failing_since: null });
    ctx.clock.advance(20_000);
    await ctx.container.webhookDelivery.deliverDue();
    expect(down.received).toHaveLength(17);
  });

  it('take their queue rows and attempts with them when their event goes, or with the purge once their endpoint is deleted', async () => {
    const hook = await receiver(() => ({ status: 500 }));
    const { customer, endpoint } = await customerWithEndpoint(hook.url);
    const first = await emit(ctx, { appId: customer.app.id });
    const second = await emit(ctx, { appId: customer.app.id });
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(2);
    const deliveryIds = [...first.deliveryIds, ...second.deliveryIds];
    const left = () =>
      ctx.container.pool.one(
        sql.type(z.object({ queued: z.number(), attempts: z.number() }))`
          select (select count(*) from webhook_due where delivery_id = any(${sql.array(deliveryIds, 'text')}))::int as queued,
                 (select count(*) from webhook_attempts where delivery_id = any(${sql.array(deliveryIds, 'text')}))::int as attempts`,
      );
    // Each failed once: queued for its retry, with its attempt.
    expect(await left()).toEqual({ queued: 2, attempts: 2 });
    // As the retention pruner deletes an event.
    await ctx.container.pool.query(sql.unsafe`delete from webhook_events where id = ${first.id}`);
    expect(await left()).toEqual({ queued: 1, attempts: 1 });
    // A ping that failed too, waiting for its retry: a disabled endpoint still gets pings, so only
    // the endpoint being deleted keeps it from the next claim.
    const ping = (
      await callWithKey(ctx.app, customer.token, 'POST', `/v1/webhooks/${endpoint.id}/test`)
    ).json();
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(3);
    await callWithKey(ctx.app, customer.token, 'DELETE', `/v1/webhooks/${endpoint.id}`);
    // Gone from every answer at once, and sent nothing more; its rows go with the next purge.
    expect(
      (await callWithKey(ctx.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}`)).statusCode,
    ).toBe(404);
    expect((await callWithKey(ctx.app, customer.token, 'GET', '/v1/webhooks')).json().items).toEqual([]);
    expect((await emit(ctx, { appId: customer.app.id })).deliveryIds).toEqual([]);
    const pinged = await inTransaction(ctx.container.pool, (tx) =>
      ctx.container.outbox.ping(tx, customer.app.id, 'test', endpoint.id),
    );
    expect(pinged.deliveryIds).toEqual([]);
    ctx.clock.advance(10_000);
    await ctx.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(3);
    // Not claimed either: its retry is still due, not held until a claim's end.
    const pingDue = () =>
      ctx.container.pool.maybeOneFirst(
        sql.type(
          z.object({ due_at: z.date() }),
        )`select due_at from webhook_due where delivery_id = ${ping.id}`,
      );
    expect((await pingDue())!.getTime()).toBeLessThanOrEqual(ctx.clock.now().getTime());
    expect(await left()).toEqual({ queued: 1, attempts: 1 });
    // Purged once deleted five minutes ago, not before.
    ctx.clock.advance(5 * 60_000 - 10_000);
    await ctx.container.webhooks.purgeDeleted();
    expect(await left()).toEqual({ queued: 1, attempts: 1 });
    ctx.clock.advance(1);
    await ctx.container.webhooks.purgeDeleted();
    expect(await left()).toEqual({ queued: 0, attempts: 0 });
    expect(await pingDue()).toBeNull();
    expect(
      await ctx.container.pool.oneFirst(
        sql.type(z.object({ count: z.number() }))`
          select count(*)::int as count from webhook_endpoints where id = ${endpoint.id}`,
      ),
    ).toBe(0);
  });

  it('hold a slow endpoint to its concurrency limit while another endpoint gets its events', async () => {
    const limited = await startTestApp({ clock: futureClock(), delivery: { perEndpoint: 2 } });
    contexts.push(limited);
    const slow = await receiver(() => ({ status: 200, delayMs: 400 }));
    const fast = await receiver();
    const slowOne = await customerWithEndpoint(slow.url, {}, { on: limited });
    const fastOne = await customerWithEndpoint(fast.url, {}, { on: limited });
    for (let i = 0; i < 8; i += 1) await emit(limited, { appId: slowOne.customer.app.id });
    for (let i = 0; i < 4; i += 1) await emit(limited, { appId: fastOne.customer.app.id });
    const all = limited.container.webhookDelivery.deliverDue();
    await fast.waitFor(4, 1_000);
    expect(slow.received.length).toBeLessThan(8);
    await all;
    expect(slow.received).toHaveLength(8);
    expect(slow.maxInFlight).toBe(2);
  });

  it('claim of an endpoint what its pace can start in time: few of a new or slow one, more as it proves fast', async () => {
    const own = await startTestApp({ clock: futureClock() });
    contexts.push(own);
    const slow = await receiver(() => ({ status: 200, delayMs: 500 }));
    const { customer, endpoint } = await customerWithEndpoint(slow.url, {}, { on: own });
    for (let i = 0; i < 40; i += 1) await emit(own, { appId: customer.app.id });
    const unclaimed = () =>
      own.container.pool.oneFirst(sql.unsafe`
        select count(*)::int from webhook_due
        where endpoint_id = ${endpoint.id} and due_at <= ${sql.timestamp(own.clock.now())}`);
    const all = own.container.webhookDelivery.deliverDue();
    await slow.waitFor(1, 5_000);
    // Not yet seen: as if each attempt took the whole 5 s, 8 at a time start 16 in half the 20 s a
    // claim leaves for starting attempts.
    expect(await unclaimed()).toBe(40 - 16);
    // Seen at 500 ms an attempt, a later claim takes all that is left (160 would start in time).
    await slow.waitFor(17, 10_000);
    expect(await unclaimed()).toBe(0);
    await all;
    expect(slow.received).toHaveLength(40);
  }, 30_000);

  it('give back unsent what their claim would not start in time: due at once, not when it lapses', async () => {
    const own = await startTestApp({ clock: futureClock(), delivery: { perEndpoint: 1 } });
    contexts.push(own);
    const hook = await receiver((_request, index) => ({ status: 200, delayMs: index === 0 ? 500 : 0 }));
    const { customer } = await customerWithEndpoint(hook.url, {}, { on: own });
    for (let i = 0; i < 3; i += 1) await emit(own, { appId: customer.app.id });
    const all = own.container.webhookDelivery.deliverDue();
    await hook.waitFor(1, 5_000);
    // 25 s into the 30 s claim: the two held behind the first could no longer end in time.
    own.clock.advance(25_000);
    await all;
    expect(hook.received).toHaveLength(3);
  });

  it("are not blocked by a disabled endpoint's backlog, however long", async () => {
    const waiting = await receiver();
    const live = await receiver();
    const stopped = await customerWithEndpoint(waiting.url, { enabled: false });
    const other = await customerWithEndpoint(live.url);
    await inTransaction(ctx.container.pool, async (tx) => {
      for (let i = 0; i < 1_100; i += 1) {
        await ctx.container.outbox.emit(tx, {
          appId: stopped.customer.app.id,
          mode: 'test',
          type: 'buzz.created',
          data: { i },
        });
      }
    });
    await callWithKey(ctx.app, stopped.customer.token, 'PATCH', `/v1/webhooks/${stopped.endpoint.id}`, {
      event_types: ['buzz.created'],
    });
    await emit(ctx, { appId: other.customer.app.id });
    await ctx.container.webhookDelivery.deliverDue();
    expect(live.received).toHaveLength(1);
    expect(waiting.received).toHaveLength(0);
    await callWithKey(ctx.app, stopped.customer.token, 'DELETE', `/v1/webhooks/${stopped.endpoint.id}`);
  }, 60_000);

  it('write nothing for a claim that lapsed and was taken again, and redeliver once however often asked', async () => {
    const { own, hook, customer, endpoint, claim } = await withOneDelivery(11);
    const store = webhooksStore(own.container.pool);
    const now = own.clock.now();
    const first = await claim(now);
    const lapsed = new Date(now.getTime() + 31_000);
    // Looking through endpoints from past the last id: round the end to the first, and on.
    const second = await claim(lapsed, 'x');
    expect(first).toBeDefined();
    expect(second?.id).toBe(first?.id);
    const success = (claimedUntil: Date, address: string) =>
      successOf({ id: first!.id, claimedUntil, address }, endpoint.id, now);
    // The first claim's, by its end and by its address: the second claim moved the row from there.
    await store.recordSuccesses([success(new Date(now.getTime() + 30_000), first!.address)]);
    await store.recordSuccesses([success(new Date(now.getTime() + 30_000), second!.address)]);
    const read = () =>
      callWithKey(own.app, customer.token, 'GET', `/v1/webhooks/${endpoint.id}/deliveries/${first!.id}`);
    expect((await read()).json()).toMatchObject({ status: 'pending', attempts: 0 });
    await store.recordSuccesses([success(new Date(lapsed.getTime() + 30_000), second!.address)]);
    expect((await read()).json()).toMatchObject({ status: 'succeeded', attempts: 1 });

    const redeliver = () =>
      callWithKey(
        ctx.app,
        customer.token,
        'POST',
        `/v1/webhooks/${endpoint.id}/deliveries/${first!.id}/redeliver`,
      );
    await Promise.all([redeliver(), redeliver()]);
    own.clock.set(new Date(lapsed.getTime() + 31_000));
    await own.container.webhookDelivery.deliverDue();
    expect(hook.received).toHaveLength(1);
  });

  it('write nothing for a claim taken again while its record waits for the row', async () => {
    const { own, customer, endpoint, deliveryId, claim } = await withOneDelivery(12);
    const now = own.clock.now();
    const first = await claim(now);
    expect(first).toBeDefined();
    const lapsed = new Date(now.getTime() + 31_000);
    let recording: Promise<unknown> | undefined;
    // Another worker claims the lapsed delivery again and has not committed when the record of the
    // first claim comes to the row: the record waits, then reads the other worker's version of it.
    await own.container.pool.connect(async (other) => {
      await other.query(sql.unsafe`begin`);
      const pid = await other.oneFirst(
        sql.type(z.object({ pid: z.number() }))`select pg_backend_pid() as pid`,
      );
      const again = await webhooksStore(other).claimDue({
        now: lapsed,
        claimUntil: new Date(lapsed.getTime() + 30_000),
        limit: 1_000,
        rooms: new Map(),
        unseenRoom: 10,
        skip: [],
        start: '',
      });
      expect(again.map((row) => row.id)).toContain(deliveryId);
      ({ recording } = await recordBehind(
        own.container.pool,
        pid,
        'the other claim',
        successOf(
          { id: deliveryId, claimedUntil: new Date(now.getTime() + 30_000), address: first!.address },
          endpoint.id,
          now,
        ),
      ));
      await other.query(sql.unsafe`commit`);
    });
    await recording;
    const read = await callWithKey(
      own.app,
      customer.token,
      'GET',
      `/v1/webhooks/${endpoint.id}/deliveries/${deliveryId}`,
    );
    expect(read.json()).toMatchObject({ status: 'pending', attempts: 0 });
    const due = await own.container.pool.oneFirst(
      sql.type(
        z.object({ due_at: z.date() }),
      )`select due_at from webhook_due where delivery_id = ${deliveryId}`,
    );
    expect(due).toEqual(new Date(lapsed.getTime() + 30_000));
  });

  it('record an attempt beside the deletion of its endpoint, neither waiting for the other', async () => {
    const { own, endpoint, deliveryId, claim } = await withOneDelivery(13);
    const now = own.clock.now();
    const claimed = await claim(now);
    expect(claimed).toBeDefined();
    let recording: Promise<unknown> | undefined;
    // A deletion's locks a step at a time, in its order: the endpoint, its delivery (the foreign key's
    // cascade), then the queue row (the trigger). The record starts while it holds the first two.
    // A connection of its own with a transaction begun by hand: slonik refuses the pool's other
    // connections inside one of its transactions.
    await own.container.pool.connect(async (deletion) => {
      await deletion.query(sql.unsafe`begin`);
      const pid = await deletion.oneFirst(
        sql.type(z.object({ pid: z.number() }))`select pg_backend_pid() as pid`,
      );
      await deletion.query(sql.unsafe`select from webhook_endpoints where id = ${endpoint.id} for update`);
      await deletion.query(sql.unsafe`select from webhook_deliveries where id = ${deliveryId} for update`);
      ({ recording } = await recordBehind(
        own.container.pool,
        pid,
        'the deletion',
        successOf(
          { id: deliveryId, claimedUntil: new Date(now.getTime() + 30_000), address: claimed!.address },
          endpoint.id,
          now,
        ),
      ));
      await deletion.query(sql.unsafe`delete from webhook_due where delivery_id = ${deliveryId}`);
      await deletion.query(sql.unsafe`delete from webhook_deliveries where id = ${deliveryId}`);
      await deletion.query(sql.unsafe`commit`);
    });
    // No deadlock (which would fail one of the two), and nothing recorded for the delivery deleted.
    await recording;
    const attempts = await own.container.pool.oneFirst(
      sql.type(z.object({ count: z.number() }))`
        select count(*)::int as count from webhook_attempts where delivery_id = ${deliveryId}`,
    );
    expect(attempts).toBe(0);
  });

  it('from two control planes send each of 1,000 events exactly once', async () => {
    const clock = futureClock();
    const other = await startTestApp({ clock });
    contexts.push(other);
    const first = await startTestApp({ clock });
    contexts.push(first);
    const hook = await receiver();
    const { customer } = await customerWithEndpoint(hook.url, {}, { on: first });
    await inTransaction(first.container.pool, async (tx) => {
      for (let i = 0; i < 1_000; i += 1) {
        await first.container.outbox.emit(tx, {
          appId: customer.app.id,
          mode: 'test',
          type: 'buzz.created',
          data: { n: i },
        });
      }
    });
    await Promise.all([
      first.container.webhookDelivery.deliverDue(),
      other.container.webhookDelivery.deliverDue(),
    ]);
    expect(hook.received).toHaveLength(1_000);
    expect(new Set(hook.received.map((r) => r.eventId)).size).toBe(1_000);
  }, 60_000);

  it('tell a live app its balance fell under the threshold, once per fall', async () => {
    const { customer } = await customerWithEndpoint(
      'https://hooks.example.com/balance',
      { event_types: ['balance.low'] },
      { mode: 'live', balanceMicros: 2_000_000 },
    );
    // The test stack's control plane runs the same check with the same threshold: whichever process
    // finds the fall first emits the event, and the other finds the account already told.
    const threshold = parseUsd(ctx.container.settings.SVC_BALANCE_LOW_USD);
    const notify = () => ctx.container.billing.notifyLowBalances(threshold);
    const told = async () =>
      (
        await ctx.container.pool.anyFirst(
          sql.unsafe`select body from webhook_events where app_id = ${customer.app.id} and type = 'balance.low'`,
        )
      ).map((body) => JSON.parse(body as string));
    const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' as const };
    const spend = (calls: number) =>
      meterNow(ctx.container, payer, [{ product: 'writes', metric: 'calls', quantity: calls }]);
    const balance = async () => (await ctx.container.billing.getBalance(customer.account.id)).balance_micros;

    await notify();
    expect(await told()).toHaveLength(0);
    await spend(1_000_000);
    expect(await balance()).toBeLessThan(threshold);
    await notify();
    await notify();
    const [event] = await told();
    expect(await told()).toHaveLength(1);
    expect(event).toMatchObject({
      type: 'balance.low',
      mode: 'live',
      data: { account_id: customer.account.id, balance_micros: await balance(), threshold_micros: threshold },
    });
    // Topped up above it, then under it again: told again.
    const amountMicros = threshold - (await balance()) + 1_000_000;
    await ctx.container.billing.topUp({ accountId: customer.account.id, amountMicros, reference: 'up' });
    await notify();
    expect(await told()).toHaveLength(1);
    await spend(10_000_000);
    expect(await balance()).toBeLessThan(threshold);
    await notify();
    expect(await told()).toHaveLength(2);
  });
});
