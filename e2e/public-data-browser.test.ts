/**
 * An app's web client on another origin acts for its signed-in user with the user token the app's
 * server minted: it creates the user's profile and publishes a buzz from the browser (CORS, the
 * bearer token, an Idempotency-Key on a retried publish), and the app's server then reads the buzz
 * with its secret key, all against the running stack.
 */
import { describe, expect, it } from 'vitest';
import { useWebApp } from './support/browser.js';
import { api, createCustomer, stackSettings } from './support/stack.js';

const PAGE = `<!doctype html><meta charset="utf-8"><title>feed</title>
<script>
  window.call = async (api, token, method, path, body, idempotencyKey) => {
    const headers = { authorization: 'Bearer ' + token };
    if (body) headers['content-type'] = 'application/json';
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    const response = await fetch(api + path, { method, headers, body: body && JSON.stringify(body) });
    return {
      status: response.status,
      cost: response.headers.get('x-svc-cost-usd'),
      replayed: response.headers.get('idempotent-replayed'),
      body: await response.json(),
    };
  };
</script>`;

interface Answer {
  status: number;
  cost: string | null;
  replayed: string | null;
  body: Record<string, unknown>;
}

const web = useWebApp({ '/': { type: 'text/html', body: PAGE } });

describe('a web client with a user token', () => {
  it('writes the user’s profile and buzz from the browser; the app’s server reads them', async () => {
    const customer = await createCustomer(web.container);
    const userId = `web-user-${Date.now()}`;
    const username = `web_${Date.now().toString(36)}`;
    const minted = await api<{ token: string }>(customer, 'POST', `/v1/users/${userId}/tokens`, {});
    expect(minted.status).toBe(200);

    const context = await web.browser.newContext();
    try {
      const page = await context.newPage();
      await page.goto(web.url);
      const call = (token: string, method: string, path: string, body?: object, idempotencyKey?: string) =>
        page.evaluate(
          ([base, t, m, p, b, k]) =>
            (
              window as unknown as {
                call(...args: unknown[]): Promise<Answer>;
              }
            ).call(base, t, m, p, b, k),
          [
            stackSettings().SVC_PUBLIC_URL,
            token,
            method,
            path,
            body ?? null,
            idempotencyKey ?? null,
          ] as const,
        );

      const profile = await call(minted.body.token, 'PUT', '/v1/me/profile', {
        username,
        full_name: 'Web User',
      });
      expect(profile.status, JSON.stringify(profile.body)).toBe(200);
      expect(profile.body).toMatchObject({ id: userId, username });
      // The cost header is readable from the page: a test key's write is priced, never charged.
      expect(profile.cost).toMatch(/^\d+\.\d{6}$/);

      const published = await call(
        minted.body.token,
        'POST',
        '/v1/me/buzzes',
        { text: 'hello from the browser' },
        'k1',
      );
      const retried = await call(
        minted.body.token,
        'POST',
        '/v1/me/buzzes',
        { text: 'hello from the browser' },
        'k1',
      );
      expect(published.status).toBe(200);
      expect(retried.replayed).toBe('true');
      expect(retried.body.id).toBe(published.body.id);

      // The secret key has no business in a browser, and /v1/me refuses it.
      const withKey = await call(customer.token, 'GET', '/v1/me/profile');
      expect(withKey.status).toBe(401);
    } finally {
      await context.close();
    }

    const feed = await api<{ items: { id: string; text: string; author_id: string }[] }>(
      customer,
      'GET',
      `/v1/buzzes?author=${username}`,
    );
    expect(feed.status).toBe(200);
    expect(feed.body.items).toEqual([
      expect.objectContaining({ text: 'hello from the browser', author_id: userId }),
    ]);
  });
});
