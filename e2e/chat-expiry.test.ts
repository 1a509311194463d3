/** A credential past its ttl is refused by the real login path. Takes the shortest ttl, 60 s. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Container } from '../control-plane/src/container.js';
import { api, createCustomer, openContainer } from './support/stack.js';
import { type ChatCredential, loginFailure } from './support/xmpp.js';

let container: Container;
beforeAll(async () => {
  container = await openContainer();
});
afterAll(async () => {
  await container.close();
});

describe('an expired chat credential', () => {
  it('is refused once its 60 seconds are over', { timeout: 90_000 }, async () => {
    const customer = await createCustomer(container);
    const { body: credential } = await api<ChatCredential>(customer, 'POST', '/v1/realtime/chat/tokens', {
      user_id: 'brief',
      ttl_seconds: 60,
    });
    expect(await loginFailure(credential)).toBeNull();
    await new Promise((resolve) =>
      setTimeout(resolve, Date.parse(credential.expires_at) - Date.now() + 1_000),
    );
    expect(await loginFailure(credential)).toBe('not-authorized');
  });
});
