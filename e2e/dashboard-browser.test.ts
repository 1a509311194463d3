/**
 * The developer dashboard in Debian's Chromium against the running stack: the operator's
 * invitation, keys shown once and refused once revoked, a webhook's real deliveries and rotation,
 * usage after priced calls, a ledger line after a CLI top-up, the products' pages, a viewer's
 * refusal and forged forms refused. Every page is checked with axe-core, at phone width, for console
 * errors, and kept as a screenshot in e2e/artifacts/dashboard/.
 */
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { promisify } from 'node:util';
import type { BrowserContext, Page } from 'playwright';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Receiver, startReceiver } from '../control-plane/test/webhook-receiver.js';
import { launchChromium, servePages } from './support/browser.js';
import {
  api,
  type Customer,
  createCustomer,
  meterNow,
  openContainer,
  stackSettings,
} from './support/stack.js';

const ARTIFACTS = new URL('./artifacts/dashboard/', import.meta.url).pathname;
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const PASSWORD = 'a long and memorable passphrase';
const base = stackSettings().SVC_PUBLIC_URL;

/** The admin CLI as the operator runs it, against the test stack's settings. */
async function admin(...args: string[]): Promise<Record<string, unknown>> {
  const { stdout } = await promisify(execFile)('npx', ['tsx', 'control-plane/src/cli/admin.ts', ...args], {
    env: process.env,
  });
  return JSON.parse(stdout) as Record<string, unknown>;
}

type Container = Awaited<ReturnType<typeof openContainer>>;
let container: Container;
let browser: Awaited<ReturnType<typeof launchChromium>>;
let owner: BrowserContext;
let page: Page;
let customer: Awaited<ReturnType<typeof createCustomer>>;
let receiver: Receiver;
/** What each page logged: errors and warnings, and uncaught exceptions. */
const problems = new WeakMap<Page, string[]>();
const email = `owner${Date.now()}@example.com`;

/** Everything a page must pass: no serious or critical axe violation, no console error, no sideways scroll on a phone. */
async function checkPage(target: Page, name: string) {
  await target.screenshot({ path: `${ARTIFACTS}${name}.png`, fullPage: true });
  // Evaluated rather than added as a script tag: the dashboard's CSP rightly refuses inline scripts.
  await target.evaluate(AXE_SOURCE);
  const violations = await target.evaluate(async () => {
    const result = await (
      window as unknown as {
        axe: { run(): Promise<{ violations: { id: string; impact: string; nodes: unknown[] }[] }> };
      }
    ).axe.run();
    return result.violations
      .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
      .map((violation) => `${violation.id} (${violation.nodes.length})`);
  });
  expect(violations, `axe on ${name}`).toEqual([]);
  const viewport = target.viewportSize()!;
  await target.setViewportSize({ width: 375, height: 800 });
  // Nothing sticks out sideways (a wide table scrolls inside its own box); the message names what does.
  const { width, sticksOut } = await target.evaluate(() => ({
    width: document.documentElement.scrollWidth,
    sticksOut: Array.from(document.querySelectorAll('body *'))
      .filter((element) => element.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
      .map((element) => `${element.tagName.toLowerCase()}.${element.className}`),
  }));
  expect(width, `${name} at phone width: ${sticksOut.join(', ')}`).toBeLessThanOrEqual(375);
  await target.screenshot({ path: `${ARTIFACTS}${name}-phone.png` });
  await target.setViewportSize(viewport);
  expect(problems.get(target), `console on ${name}`).toEqual([]);
}

function watch(target: Page) {
  const logged: string[] = [];
  problems.set(target, logged);
  target.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning')
      logged.push(`${message.type()}: ${message.text()}`);
  });
  target.on('pageerror', (error) => logged.push(`page error: ${error.message}`));
  return target;
}

/** The usage chart once the page's script drew it (an API response's bandwidth is usage too, so there is always one). */
async function chartDrawn() {
  await page.waitForSelector('#usage-chart[data-drawn="true"]');
  return page.evaluate(
    () => (window as unknown as { __usageChart: { points: number; series: number } }).__usageChart,
  );
}

const appUrl = (section = '', query = 'mode=test') =>
  `${base}/dashboard/apps/${customer.app.id}${section}?${query}`;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  container = await openContainer();
  browser = await launchChromium();
  customer = await createCustomer(container);
  receiver = await startReceiver(() => ({ status: 200, body: '{"thanks":true}' }));
  owner = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await owner.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  page = watch(await owner.newPage());
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await container?.close();
});

describe('the dashboard', () => {
  it('lets the operator’s invited owner in, by keyboard, and signs in again by password', async () => {
    const invite = await admin('dashboard', 'invite', '--account', customer.account.id, '--email', email);
    await page.goto(String(invite.url));
    await checkPage(page, 'invitation');
    await page.keyboard.press('Tab');
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    await page.getByLabel('Your name').fill('Olga Owner');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByLabel('Password').press('Enter');
    await page.waitForURL(`${base}/dashboard/apps`);
    await expect.poll(() => page.textContent('h1')).toBe('Apps');
    await checkPage(page, 'apps');

    const signIn = watch(await (await browser.newContext()).newPage());
    await signIn.goto(`${base}/dashboard/login`);
    await checkPage(signIn, 'sign-in');
    await signIn.getByLabel('Email').fill(email);
    await signIn.getByLabel('Password').fill('not the password');
    await signIn.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => signIn.textContent('[role=alert]')).toContain('Wrong email or password');
    // Chromium logs the refusal's 401 as a failed load: expected here, so it is not a page problem.
    expect(problems.get(signIn)!.splice(0)).toEqual([
      'error: Failed to load resource: the server responded with a status of 401 (Unauthorized)',
    ]);
    await signIn.goto(`${base}/dashboard/login`);
    await signIn.getByLabel('Email').fill(email);
    await signIn.getByLabel('Password').fill(PASSWORD);
    await signIn.getByRole('button', { name: 'Sign in' }).click();
    await signIn.waitForURL(`${base}/dashboard/apps`);
    await signIn.context().close();
  });

  let secret = '';
  it('shows a new secret key once, copies it, and the API takes it until it is revoked', async () => {
    await page.goto(appUrl('/keys'));
    await page.getByRole('radio', { name: 'Secret (server)' }).check();
    await page.getByRole('radio', { name: 'Test' }).check();
    await page.getByRole('button', { name: 'Create key' }).click();
    await expect.poll(() => page.textContent('h1')).toBe('Your new key');
    secret = (await page.textContent('#new-key'))!.trim();
    expect(secret).toMatch(/^svc_test_[0-9A-Za-z]{32}$/);
    await page.getByRole('button', { name: 'Copy' }).click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(secret);
    await checkPage(page, 'key-created');
    const key: Customer = { token: secret };
    expect((await api(key, 'GET', '/v1/realtime/balance')).status).toBe(200);

    await page.goto(appUrl('/keys'));
    expect(await page.content()).not.toContain(secret);
    const row = page.locator('tr', { hasText: `svc_test_…${secret.slice(-4)}` });
    await expect
      .poll(async () => {
        await page.reload();
        return row.locator('td').nth(3).textContent();
      })
      .toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/);
    await checkPage(page, 'keys');

    await row.getByRole('button', { name: 'Revoke…' }).click();
    await expect.poll(() => page.textContent('h1')).toBe('Revoke this key?');
    await checkPage(page, 'key-revoke');
    await page.getByRole('button', { name: 'Revoke the key' }).click();
    await expect.poll(() => page.textContent('[role=status]')).toContain('is revoked');
    expect((await api(key, 'GET', '/v1/realtime/balance')).status).toBe(401);
  });

  it('registers a webhook, shows a real delivery, rotates its secret and redelivers', async () => {
    await page.goto(appUrl('/webhooks'));
    await checkPage(page, 'webhooks-empty');
    await page.getByLabel('URL').fill(`${receiver.url}/hooks`);
    await page.getByLabel('Description (optional)').fill('orders service');
    await page.getByLabel('balance.low').check();
    await page.getByLabel('buzz.created').check();
    await page.getByLabel('Only these profiles (optional)').fill('alice\nbob');
    await page.getByRole('button', { name: 'Register endpoint' }).click();
    await expect.poll(() => page.textContent('h1')).toBe('Endpoint registered');
    const first = (await page.textContent('#endpoint-secret'))!.trim();
    await page.getByRole('link', { name: 'Done, to the endpoint' }).click();
    expect(await page.locator('dd').nth(2).textContent()).toBe('buzz.created, balance.low');
    expect(await page.locator('dd').nth(3).textContent()).toBe('alice, bob');

    const verifiedWith = (delivery: { body: string; headers: Record<string, unknown> }, key: string) =>
      delivery.headers['x-svc-signature'] ===
      `sha256=${createHmac('sha256', key).update(delivery.body).digest('hex')}`;
    await page.getByRole('button', { name: 'Send a test event' }).click();
    const [ping] = await receiver.waitFor(1);
    expect(verifiedWith(ping!, first)).toBe(true);
    await expect
      .poll(async () => {
        await page.reload();
        return page.locator('tr.delivery').first().getAttribute('data-status');
      })
      .toBe('succeeded');
    const delivery = page.locator('tr.delivery').first();
    expect(await delivery.locator('td').nth(3).textContent()).toBe('200');
    expect(await delivery.locator('td').nth(4).textContent()).toMatch(/^\d+ ms$/);
    await delivery.locator('summary').click();
    expect(await delivery.locator('pre').textContent()).toBe('{"thanks":true}');
    await checkPage(page, 'webhook');

    await page.getByRole('button', { name: 'Rotate secret…' }).click();
    expect(await page.textContent('.warning')).toMatch(/stops working the\s+moment you\s+confirm/);
    await page.getByRole('button', { name: 'Rotate now' }).click();
    expect(await page.textContent('[role=alert]')).toContain('The old secret has stopped working');
    const second = (await page.textContent('#endpoint-secret'))!.trim();
    expect(second).not.toBe(first);
    await page.getByRole('link', { name: 'Done, to the endpoint' }).click();

    await page.locator('tr.delivery').first().getByRole('button', { name: 'Redeliver' }).click();
    const [, again] = await receiver.waitFor(2);
    expect(JSON.parse(again!.body).id).toBe(JSON.parse(ping!.body).id);
    expect(verifiedWith(again!, second)).toBe(true);
    expect(verifiedWith(again!, first)).toBe(false);
    await expect
      .poll(async () => {
        await page.reload();
        return page.locator('tr.delivery').first().locator('td').nth(2).textContent();
      })
      .toBe('2');
  });

  it('draws the usage chart once priced calls are made, beside the allowances and prices', async () => {
    await page.goto(`${base}/dashboard/usage?mode=test&days=7`);
    await checkPage(page, 'usage-before');
    const writes = page.locator('#usage-lines tbody tr', { hasText: 'writes' });
    expect(await writes.count()).toBe(0);
    const seriesBefore = (await chartDrawn()).series;
    for (const externalId of ['north', 'south', 'east'])
      expect(
        (await api(customer, 'POST', '/v1/orgs', { externalId, name: `Team ${externalId}` })).status,
      ).toBe(201);
    await expect
      .poll(
        async () => {
          await page.reload();
          return writes.locator('td').nth(3).textContent();
        },
        { timeout: 15_000 },
      )
      .toBe('3 call');
    expect((await chartDrawn()).series).toBe(seriesBefore + 1);
    expect(await page.textContent('#usage-total')).toBe('$0.0015');
    const price = page.locator('tr', { hasText: 'generate_calls' });
    expect(await price.locator('td').nth(2).textContent()).toBe('$0.002 / call');
    const allowance = page.locator('tr', { hasText: 'signed_urls' }).first();
    expect(await allowance.locator('td').nth(2).textContent()).toBe('10000 URL');
    await checkPage(page, 'usage');

    await page.goto(appUrl());
    expect(await page.locator('.card', { hasText: 'organisations' }).locator('.figure').textContent()).toBe(
      '3',
    );
    await checkPage(page, 'app-overview');
  });

  it('shows a ledger line after the operator’s CLI top-up, and what is owed past the balance', async () => {
    await page.goto(`${base}/dashboard/billing`);
    await checkPage(page, 'balance-empty');
    const reference = `payment-${Date.now()}`;
    await admin(
      'balance',
      'topup',
      '--account',
      customer.account.id,
      '--amount-usd',
      '25',
      '--reference',
      reference,
    );
    await page.reload();
    expect(await page.locator('#ledger tr', { hasText: reference }).locator('td').nth(3).textContent()).toBe(
      '$25.00',
    );
    expect(await page.textContent('#balance')).toBe('$25.00');
    expect(await page.textContent('.notice')).toContain('npm run admin -- balance topup');
    await page.getByLabel('Threshold in dollars').fill('5');
    await page.getByRole('button', { name: 'Save threshold' }).click();
    await expect.poll(() => page.textContent('[role=status]')).toContain('threshold is saved');

    // Live usage reported afterwards ($30 of writes) runs past the $25: the page shows what is owed.
    await meterNow(container, { accountId: customer.account.id, appId: customer.app.id, mode: 'live' }, [
      { product: 'writes', metric: 'calls', quantity: 60_000 },
    ]);
    await page.reload();
    expect(await page.textContent('#balance')).toBe('$0.00');
    expect(await page.textContent('#owed')).toBe('$5.00');
    expect(
      await page.locator('#ledger tr', { hasText: 'usage' }).first().locator('td').nth(3).textContent(),
    ).toBe('−$30.00');
    await checkPage(page, 'balance');
  });

  it('changes settings, reveals the shield secret, and lists, opens and deletes storage objects', async () => {
    await page.goto(appUrl('/settings'));
    await page.getByLabel(/Message archive/).check();
    await page.getByLabel('Largest room').fill('250');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await expect.poll(() => page.textContent('[role=status]')).toContain('Settings saved');
    const settings = await api<{
      mam: boolean;
      max_room_size: number;
      shield_secret: string;
      publishable_key: string;
    }>(customer, 'POST', '/v1/realtime/app');
    expect(settings.body).toMatchObject({ mam: true, max_room_size: 250 });
    await checkPage(page, 'settings');
    await page.getByRole('button', { name: 'Reveal the shield secret' }).click();
    expect((await page.textContent('#shield-secret'))!.trim()).toBe(settings.body.shield_secret);
    await checkPage(page, 'shield-secret');

    // A client asks for a shield ticket with the publishable key: its (hashed) address is in the report.
    const ticket = await fetch(`${base}/v1/realtime/shield/ticket`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-publishable-key': String(settings.body.publishable_key),
      },
      body: JSON.stringify({ subject: 'viewer-1', scope: 'stream-1' }),
    });
    expect(ticket.status).toBe(200);
    await page.goto(appUrl('/shield'));
    const busiest = page.locator('tr', { hasText: 'stream-1' });
    expect(await busiest.locator('td').first().textContent()).toMatch(/^[0-9a-f]{12}$/);
    expect(await busiest.locator('td').nth(2).textContent()).toBe('1');
    await checkPage(page, 'shield');

    const upload = await api<{
      object: { id: string };
      upload_url: string;
      upload_headers: Record<string, string>;
    }>(customer, 'POST', '/v1/storage/uploads', {
      name: 'hello.txt',
      content_type: 'text/plain',
      size_bytes: 5,
    });
    await fetch(upload.body.upload_url, {
      method: 'PUT',
      headers: upload.body.upload_headers,
      body: 'hello',
    });
    await api(customer, 'POST', `/v1/storage/objects/${upload.body.object.id}/complete`);
    await page.goto(appUrl('/storage', 'mode=test&status=ready'));
    const row = page.locator('tr', { hasText: upload.body.object.id });
    const [opened] = await Promise.all([
      owner.waitForEvent('page'),
      row.getByRole('link', { name: 'Open' }).click(),
    ]);
    await opened.waitForLoadState();
    expect(await opened.textContent('body')).toBe('hello');
    await opened.close();
    await checkPage(page, 'storage');
    await row.getByRole('button', { name: 'Delete…' }).click();
    await page.getByRole('button', { name: 'Delete the object' }).click();
    await expect.poll(() => page.textContent('[role=status]')).toContain('The object is deleted');
    expect((await api(customer, 'GET', `/v1/storage/objects/${upload.body.object.id}`)).status).toBe(404);
  });

  it('invites a viewer, who reads but is refused a key creation', async () => {
    await page.goto(`${base}/dashboard/team`);
    await page.getByLabel('Email').fill(`viewer${Date.now()}@example.com`);
    await page.getByLabel('Role', { exact: true }).selectOption('viewer');
    await page.getByRole('button', { name: 'Invite' }).click();
    const link = (await page.textContent('#invite-link'))!.trim();
    await checkPage(page, 'invitation-created');
    await page.goto(`${base}/dashboard/team`);
    await checkPage(page, 'team');

    const viewer = watch(await (await browser.newContext()).newPage());
    await viewer.goto(link);
    await viewer.getByLabel('Your name').fill('Vera Viewer');
    await viewer.getByLabel('Password').fill(PASSWORD);
    await viewer.getByRole('button', { name: 'Join' }).click();
    await viewer.goto(appUrl('/keys'));
    expect(await viewer.getByRole('button', { name: 'Create key' }).count()).toBe(0);
    // The form the viewer is not shown, posted anyway with the viewer's own valid token.
    const refused = await viewer.evaluate(async (url) => {
      const token = (document.querySelector('input[name=_csrf]') as HTMLInputElement).value;
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: token, kind: 'secret', mode: 'test' }),
      });
      return { status: response.status, text: await response.text() };
    }, `${base}/dashboard/apps/${customer.app.id}/keys`);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('Your role (viewer) can look but not change anything');
    await viewer.context().close();
  });

  it('refuses form posts without the CSRF token, and from another site', async () => {
    const keysBefore = (await container.accounts.listKeys(customer.app.id)).length;
    await page.goto(appUrl('/keys'));
    const tokenless = await page.evaluate(async (url) => {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'kind=secret&mode=live',
      });
      return { status: response.status, text: await response.text() };
    }, `${base}/dashboard/apps/${customer.app.id}/keys`);
    expect(tokenless.status).toBe(403);
    expect(tokenless.text).toContain('security token is missing or stale');

    const evil = await servePages({
      '/': {
        type: 'text/html',
        body: `<!doctype html><form method="post" action="${base}/dashboard/apps/${customer.app.id}/keys">
          <input name="kind" value="secret"><input name="mode" value="live"></form>
          <script>document.forms[0].submit()</script>`,
      },
    });
    try {
      const attacked = await owner.newPage();
      const answer = await Promise.all([
        attacked.waitForResponse((response) => response.url().includes('/dashboard/apps/')),
        attacked.goto(evil.url),
      ]);
      // Another port of 127.0.0.1 is the same site, so the cookie goes along: the missing token and the
      // foreign Origin refuse it (from another site, SameSite=Strict would keep the cookie home too).
      expect(answer[0].status()).toBe(403);
      await attacked.close();
    } finally {
      evil.server.close();
    }
    expect(await container.accounts.listKeys(customer.app.id)).toHaveLength(keysBefore);
  });
});
