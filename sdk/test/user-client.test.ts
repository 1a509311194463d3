import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Container } from '../../control-plane/src/container.js';
import { createCustomer, openContainer, stackSettings } from '../../e2e/support/stack.js';
import { createServerClient, createUserClient, SvcApiError } from '../src/index.js';

// The SDK's user-token client against the running test stack: tokens minted by the server client.

const baseUrl = stackSettings().SVC_PUBLIC_URL;
let container: Container;
beforeAll(async () => {
  container = await openContainer();
});
afterAll(async () => {
  await container.close();
});

async function serverOf() {
  const customer = await createCustomer(container);
  return createServerClient({ baseUrl, secretKey: customer.token });
}

describe('the user client', () => {
  it('calls /v1/me operations by their ids with the user’s token, and is refused the app’s', async () => {
    const server = await serverOf();
    const { token } = (await server.users.tokens.create({ path: { user_id: 'sdk-fan' } })).data;
    const user = createUserClient({ baseUrl, token });
    await user.me.profile.put({ body: { username: 'sdk_fan', full_name: 'SDK Fan' } });
    expect((await user.me.profile.read()).data).toMatchObject({ username: 'sdk_fan', full_name: 'SDK Fan' });
    // A user token opens no key endpoint: the API refuses it, whatever a caller tries.
    const refused = await user.call('billing.balance.get', {}).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SvcApiError);
    expect((refused as SvcApiError).status).toBe(401);
  });

  it('fetches a fresh token through its callback when the API refuses a revoked one, and goes on', async () => {
    const server = await serverOf();
    const mint = async () =>
      (await server.users.tokens.create({ path: { user_id: 'sdk-returning' } })).data.token;
    const first = await mint();
    await server.users.tokens.revoke({ path: { user_id: 'sdk-returning' } });
    const handed: string[] = [];
    const user = createUserClient({
      baseUrl,
      token: async () => {
        const token = handed.length === 0 ? first : await mint();
        handed.push(token);
        return token;
      },
    });
    const written = await user.me.profile.put({ body: { username: 'sdk_returning' } });
    expect(written.status).toBe(200);
    expect(handed).toHaveLength(2);
    expect(handed[1]).not.toBe(first);
  });
});
