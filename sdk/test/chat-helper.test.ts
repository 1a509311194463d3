/**
 * The chat helper's credential rules against the running stack, on Node (the browser test covers
 * expiry): a credential replaced since the login is renewed once, and a refusal by the app's server
 * ends the session.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Container } from '../../control-plane/src/container.js';
import { createCustomer, ejabberdAsOperator, openContainer, stackSettings } from '../../e2e/support/stack.js';
import { connectChat } from '../src/chat.js';
import { createServerClient } from '../src/index.js';

// Node 20 has no global WebSocket, which xmpp.js opens its connections with.
(globalThis as { WebSocket?: unknown }).WebSocket ??= WebSocket;

let container: Container;
beforeAll(async () => {
  container = await openContainer();
});
afterAll(async () => {
  await container.close();
});

describe('a chat session from the helper', () => {
  it('renews a credential replaced since its login, and ends when the app server refuses one', async () => {
    const customer = await createCustomer(container);
    const svc = createServerClient({ baseUrl: stackSettings().SVC_PUBLIC_URL, secretKey: customer.token });
    let asked = 0;
    let refusing = false;
    const session = await connectChat({
      credential: async () => {
        asked++;
        if (refusing) throw new Error('this user may not chat any more');
        return (await svc.chat.tokens.create({ body: { user_id: 'ana' } })).data;
      },
    });
    const online = () => new Promise<void>((resolve) => session.xmpp.once('online', () => resolve()));
    expect(asked).toBe(1);

    // Another device of ana's mints a credential, which replaces this session's; then the connection
    // drops (its sessions are kicked). The login with the credential in hand is refused, so the helper
    // asks for a fresh one, once.
    await svc.chat.tokens.create({ body: { user_id: 'ana' } });
    const back = online();
    await kick(session.xmpp.jid!.bare().toString());
    await back;
    expect(asked).toBe(2);

    // Revoked, and the app's server refuses a new credential: the session ends with its error.
    refusing = true;
    await svc.chat.tokens.revoke({ path: { user_id: 'ana' } });
    expect(await session.ended).toMatchObject({ message: 'this user may not chat any more' });
    expect(asked).toBe(3);
    expect(session.xmpp.status).toBe('offline');
  });
});

async function kick(jid: string) {
  const [user, host] = jid.split('@') as [string, string];
  const answer = await ejabberdAsOperator(stackSettings(), 'kick_user', { user, host });
  expect(answer.status).toBe(200);
}
