/**
 * How fast the dashboard's pages load in Chromium, cold (a new browser context each time: no cached
 * assets), from navigation to the load event, against the floor of the same browser loading the
 * bare health route from the same server. Prints the built assets' sizes too.
 *
 *   npm run build -w control-plane && npm run stack -- up --profile test && npx tsx bench/dashboard.ts [loads]
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { createCustomer, meterNow } from '../control-plane/test/support.js';
import { launchChromium } from '../e2e/support/browser.js';
import { latencyLine, percentiles, useTestStackSettings } from './support.js';

useTestStackSettings();
const loads = Number(process.argv[2] ?? 30);
const container = await createContainer(loadSettings(process.env));
const app = await buildApp(container, { logger: false });
await app.listen({ host: '127.0.0.1', port: 0 });
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

const customer = await createCustomer(container);
const { token } = await container.dashboard.inviteOwner(
  customer.account.id,
  `bench${Date.now()}@example.com`,
);
const { sessionToken } = await container.dashboard.acceptInvite(
  token,
  { name: 'Bench', password: 'a long bench passphrase' },
  { address: '127.0.0.1', userAgent: 'bench' },
);
// Usage for the chart to draw.
await meterNow(container, { accountId: customer.account.id, appId: customer.app.id, mode: 'test' }, [
  { product: 'writes', metric: 'calls', quantity: 3 },
]);

const browser = await launchChromium();

/** Navigation start to the load event (the page, its script and stylesheet, the chart drawn), cold. */
async function loadTimes(path: string): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < loads; i += 1) {
    const context = await browser.newContext();
    await context.addCookies([{ name: 'svc_dash_session', value: sessionToken, url: `${base}/dashboard` }]);
    const page = await context.newPage();
    const response = await page.goto(`${base}${path}`, { waitUntil: 'load' });
    if (!response?.ok()) throw new Error(`${path} answered ${response?.status()}`);
    times.push(
      await page.evaluate(() => {
        // The browser's navigation timing entry (bench/ is typed for Node, without the DOM's names).
        const [navigation] = performance.getEntriesByType('navigation' as never) as unknown as {
          loadEventEnd: number;
          startTime: number;
        }[];
        return navigation!.loadEventEnd - navigation!.startTime;
      }),
    );
    await context.close();
  }
  return times;
}

const asset = (name: string) => {
  const content = readFileSync(new URL(`../control-plane/dist/dashboard-assets/${name}`, import.meta.url));
  return `${name} ${(content.length / 1024).toFixed(1)} KiB (${(gzipSync(content).length / 1024).toFixed(1)} KiB gzipped)`;
};
console.log(
  `dashboard page loads in Chromium, cold, ${loads} each; assets: ${asset('app.js')}, ${asset('app.css')}`,
);
// Taken in turns, so that the machine's noise falls on every path alike.
const floor: number[] = [];
const measured = new Map<string, number[]>();
const paths = [
  '/dashboard/login',
  '/dashboard/apps',
  `/dashboard/apps/${customer.app.id}/keys`,
  '/dashboard/usage?mode=test',
];
for (let round = 0; round < 3; round += 1) {
  floor.push(...(await loadTimes('/healthz')));
  for (const path of paths) measured.set(path, [...(measured.get(path) ?? []), ...(await loadTimes(path))]);
}
const floorFigures = percentiles(floor);
console.log(`${'floor: GET /healthz'.padEnd(44)} ${latencyLine(floorFigures)}`);
for (const [path, times] of measured) {
  const figures = percentiles(times);
  console.log(
    `${path.replace(customer.app.id, '{app}').padEnd(44)} ${latencyLine(figures)}  p50 ratio ${(figures.p50 / floorFigures.p50).toFixed(2)}x`,
  );
}
await browser.close();
await app.close();
await container.close();
