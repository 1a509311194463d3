/**
 * A web page on another origin fetches a shield ticket with the publishable key: headless Chromium
 * announces itself in its user agent and gets "bot"; the same page with an ordinary browser's user
 * agent gets "ok".
 */
import { describe, expect, it } from 'vitest';
import { useWebApp } from './support/browser.js';
import { api, createCustomer, stackSettings } from './support/stack.js';

const PAGE = `<!doctype html><meta charset="utf-8"><title>shield</title>
<script>
  window.askTicket = async (api, key) => {
    const response = await fetch(api + '/v1/realtime/shield/ticket', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-publishable-key': key },
      body: JSON.stringify({ subject: 'viewer-1', scope: 'stream-1' }),
    });
    return { status: response.status, body: await response.json() };
  };
</script>`;

const ORDINARY_BROWSER =
  'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36';

const web = useWebApp({ '/': { type: 'text/html', body: PAGE } });

describe('a shield ticket fetched from a web page', () => {
  it('says bot for headless Chromium and ok for an ordinary browser', async () => {
    const customer = await createCustomer(web.container);
    const { body: settings } = await api<{ publishable_key: string }>(customer, 'POST', '/v1/realtime/app');
    const ask = async (userAgent?: string) => {
      const context = await web.browser.newContext(userAgent ? { userAgent } : {});
      try {
        const page = await context.newPage();
        await page.goto(web.url);
        return await page.evaluate(
          ([base, key]) =>
            (
              window as unknown as {
                askTicket(a: string, k: string): Promise<{ status: number; body: { verdict: string } }>;
              }
            ).askTicket(base!, key!),
          [stackSettings().SVC_PUBLIC_URL, settings.publishable_key],
        );
      } finally {
        await context.close();
      }
    };
    const headless = await ask();
    expect(headless.status).toBe(200);
    expect(headless.body.verdict).toBe('bot');
    const ordinary = await ask(ORDINARY_BROWSER);
    expect(ordinary.body.verdict).toBe('ok');
  });
});
