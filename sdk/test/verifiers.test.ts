import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Container } from '../../control-plane/src/container.js';
import { inTransaction } from '../../control-plane/src/platform/transaction.js';
import { type Receiver, startReceiver } from '../../control-plane/test/webhook-receiver.js';
import { createCustomer, openContainer, stackSettings } from '../../e2e/support/stack.js';
import {
  createServerClient,
  createUserTokenVerifier,
  SvcVerificationError,
  verifyShieldTicket,
  verifyWebhook,
} from '../src/index.js';

// The SDK's verifiers against real artifacts of the running test stack: a shield ticket, a webhook
// delivery by its worker, a user token; each accepted as it came and refused once tampered with.

const baseUrl = stackSettings().SVC_PUBLIC_URL;
let container: Container;
let receiver: Receiver;
beforeAll(async () => {
  container = await openContainer();
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
  await container.close();
});

async function appOf() {
  const customer = await createCustomer(container);
  return { customer, client: createServerClient({ baseUrl, secretKey: customer.token }) };
}

const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => 'accepted',
    (error: unknown) => (error instanceof SvcVerificationError ? error.reason : String(error)),
  );

/** The same string with one character of the part at `index` (split on dots) changed. */
function tampered(token: string, index: number): string {
  const parts = token.split('.');
  const part = parts[index] ?? '';
  const middle = Math.floor(part.length / 2);
  parts[index] = `${part.slice(0, middle)}${part[middle] === 'A' ? 'B' : 'A'}${part.slice(middle + 1)}`;
  return parts.join('.');
}

describe('the verifiers', () => {
  it('accept a real shield ticket for its subject and scope, and refuse a tampered one', async () => {
    const { client } = await appOf();
    const { publishable_key: publishableKey, shield_secret: secret } = (await client.realtime.app.setup())
      .data;
    const answer = await fetch(`${baseUrl}/v1/realtime/shield/ticket`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-publishable-key': publishableKey,
        // An ordinary browser's: a headless one's gets the bot verdict.
        'user-agent':
          'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0 Safari/537.36',
      },
      body: JSON.stringify({ subject: 'post-1', scope: 'view' }),
    });
    const { ticket } = (await answer.json()) as { ticket: string };
    const expected = { secret, subject: 'post-1', scope: 'view' };
    expect(await verifyShieldTicket(ticket, expected)).toMatchObject({ s: 'post-1', c: 'view', v: 'ok' });
    expect(await refusal(verifyShieldTicket(tampered(ticket, 0), expected))).toBe('bad signature');
    expect(await refusal(verifyShieldTicket(ticket, { ...expected, subject: 'post-2' }))).toBe(
      'another subject',
    );
    expect(await refusal(verifyShieldTicket(ticket, { ...expected, now: Date.now() / 1000 + 600 }))).toBe(
      'expired',
    );
  });

  it('accept a real webhook delivery and refuse a changed body, another secret or a stale timestamp', async () => {
    const { customer } = await appOf();
    const scope = { appId: customer.app.id, mode: 'test' as const };
    const { secret } = await container.webhooks.create(scope, {
      url: receiver.url,
      event_types: ['buzz.created'],
    });
    const before = receiver.received.length;
    await inTransaction(container.pool, (tx) =>
      container.outbox.emit(tx, { ...scope, type: 'buzz.created', data: { sdk: true } }),
    );
    const delivered = (await receiver.waitFor(before + 1, 20_000)).at(-1);
    if (delivered === undefined) throw new Error('no delivery');
    const headers = delivered.headers as Record<string, string>;
    const event = await verifyWebhook<{ sdk: boolean }>(delivered.body, headers, secret);
    expect(event).toMatchObject({ type: 'buzz.created', app_id: customer.app.id, data: { sdk: true } });
    expect(await refusal(verifyWebhook(`${delivered.body} `, headers, secret))).toBe('bad X-Svc-Signature');
    expect(await refusal(verifyWebhook(delivered.body, headers, `${secret.slice(0, -2)}AA`))).toBe(
      'bad X-Svc-Signature',
    );
    const later = Number(headers['webhook-timestamp']) + 301;
    expect(await refusal(verifyWebhook(delivered.body, headers, secret, { now: later }))).toBe(
      'webhook-timestamp too old or too new',
    );
    // The spec's signature alone is not enough: a replay under a fresh timestamp fails the second.
    const replayed = { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) + 1) };
    expect(await refusal(verifyWebhook(delivered.body, replayed, secret))).toBe('bad webhook-signature');
  });

  it('accept a real user token for its app, and refuse a tampered, expired or other app’s one', async () => {
    const { customer, client } = await appOf();
    const { token } = (await client.users.tokens.create({ path: { user_id: 'sdk-user' } })).data;
    const verifier = createUserTokenVerifier({ baseUrl, appId: customer.app.id, mode: 'test' });
    expect(await verifier.verify(token)).toMatchObject({
      sub: 'sdk-user',
      aud: customer.app.id,
      mode: 'test',
    });
    expect(await refusal(verifier.verify(tampered(token, 1)))).toBe('bad signature');
    expect(await refusal(verifier.verify(token, Date.now() / 1000 + 86_400))).toBe('expired');
    const otherApp = createUserTokenVerifier({ baseUrl, appId: 'app_someoneelse', mode: 'test' });
    expect(await refusal(otherApp.verify(token))).toBe('another app');
    // A test key's token, as anyone holding the test key can mint for any user, is no live user's.
    const live = createUserTokenVerifier({ baseUrl, appId: customer.app.id });
    expect(await refusal(live.verify(token))).toBe('another mode');
  });
});
