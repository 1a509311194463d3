import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Container } from '../../control-plane/src/container.js';
import { createCustomer, openContainer, stackSettings } from '../../e2e/support/stack.js';
import { createServerClient, SvcApiError, SvcTransportError } from '../src/index.js';

// The SDK's server client against the running test stack's control plane, with real keys.

let container: Container;
beforeAll(async () => {
  container = await openContainer();
});
afterAll(async () => {
  await container.close();
});

async function clientOf(options: Parameters<typeof createCustomer>[1] = {}) {
  const customer = await createCustomer(container, options);
  return {
    customer,
    client: createServerClient({ baseUrl: stackSettings().SVC_PUBLIC_URL, secretKey: customer.token }),
  };
}

describe('the server client', () => {
  it('calls operations by their ids, with typed answers and what each cost', async () => {
    const { client } = await clientOf({ mode: 'live', balanceMicros: 10_000_000 });
    const balance = await client.billing.balance.get();
    expect(balance.data.balance_micros).toBe(10_000_000);
    expect(balance.costMicros).toBe(0);
    const chat = await client.chat.tokens.create({ body: { user_id: 'sdk-user' } });
    expect(chat.data.jid).toMatch(/@chat\.local$/);
    const live = await client.live.tokens.create({ body: { room: 'sdk', identity: 'sdk-user' } });
    expect(live.data.room).toMatch(/\.sdk$/);
    const upload = await client.storage.uploads.create({
      body: { name: 'a.txt', content_type: 'text/plain', size_bytes: 3 },
    });
    expect(upload.status).toBe(201);
    expect(upload.costUsd).toMatch(/^\d+\.\d{6}$/);
    const read = await client.call('storage.objects.list', { query: { limit: 10 } });
    expect(read.data.items.map((object) => object.id)).toContain(upload.data.object.id);
  });

  it('throws the API’s error body, telling a payment required apart', async () => {
    const { client } = await clientOf({ mode: 'live', balanceMicros: 0 });
    const refused = await client.live.tokens
      .create({ body: { room: 'r', identity: 'a' } })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SvcApiError);
    expect((refused as SvcApiError).paymentRequired).toBe(true);
    expect((refused as SvcApiError).status).toBe(402);
    const { client: funded } = await clientOf();
    const missing = await funded.storage.objects
      .read({ path: { object_id: 'obj_doesnotexist000000000' } })
      .catch((error: unknown) => error);
    expect(missing).toMatchObject({ status: 404, type: 'not_found', paymentRequired: false });
  });

  it('walks every page of a list', async () => {
    const { client } = await clientOf();
    for (let n = 0; n < 5; n += 1)
      await client.storage.uploads.create({
        body: { name: `${n}.txt`, content_type: 'text/plain', size_bytes: 1 },
      });
    const ids: string[] = [];
    for await (const object of client.paginate('storage.objects.list', { query: { limit: 2 } }))
      ids.push(object.id);
    expect(ids).toHaveLength(5);
    expect(new Set(ids).size).toBe(5);
  });

  it('sends a POST once under its Idempotency-Key: a retry is a replay, charged once', async () => {
    const { customer, client } = await clientOf({ mode: 'live', balanceMicros: 10_000_000 });
    const body = { name: 'once.txt', content_type: 'text/plain', size_bytes: 1 };
    const first = await client.storage.uploads.create({ body }, { idempotencyKey: 'sdk-once' });
    const again = await client.storage.uploads.create({ body }, { idempotencyKey: 'sdk-once' });
    expect(again.replayed).toBe(true);
    expect(again.data.object.id).toBe(first.data.object.id);
    expect(again.costMicros).toBe(first.costMicros);
    const listed = await client.storage.objects.list({ query: { limit: 10 } });
    expect(listed.data.items).toHaveLength(1);
    const balance = await container.billing.getBalance(customer.account.id);
    expect(balance.balance_micros).toBe(10_000_000 - first.costMicros);
  });

  it('gives up on a server that does not answer in time, or is not there', async () => {
    const { customer } = await clientOf();
    const silent = await import('node:net').then(({ createServer }) =>
      createServer(() => {}).listen(0, '127.0.0.1'),
    );
    await new Promise((resolve) => silent.once('listening', resolve));
    const port = (silent.address() as { port: number }).port;
    try {
      const slow = createServerClient({
        baseUrl: `http://127.0.0.1:${port}`,
        secretKey: customer.token,
        timeoutMs: 200,
        retries: 1,
      });
      await expect(slow.billing.balance.get()).rejects.toMatchObject({
        name: 'SvcTransportError',
        reason: 'timeout',
      });
    } finally {
      silent.close();
    }
    const gone = createServerClient({
      baseUrl: `http://127.0.0.1:${port}`,
      secretKey: customer.token,
      retries: 0,
    });
    const failure = await gone.billing.balance.get().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(SvcTransportError);
    expect((failure as SvcTransportError).reason).toBe('connection');
  });
});
