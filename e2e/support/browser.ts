import { createReadStream } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium } from 'playwright';
import { afterAll, beforeAll } from 'vitest';
import type { Container } from '../../control-plane/src/container.js';
import { openContainer } from './stack.js';

/** Debian's Chromium, with the flags this closed, GPU-less machine needs. */
export function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      ...extraArgs,
    ],
  });
}

/** Serves fixed pages and files on a loopback port, as an integrator's web app would. */
export async function servePages(
  routes: Record<string, { type: string; body?: string; file?: string }>,
): Promise<{
  url: string;
  server: Server;
}> {
  const server = createServer((request, response) => {
    const route = routes[request.url ?? ''];
    if (!route) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { 'content-type': route.type });
    if (route.file) createReadStream(route.file).pipe(response);
    else response.end(route.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/**
 * For one test file: the stack's services, a Chromium, and an integrator's web app serving `routes`
 * on a loopback origin of its own. Filled in before the tests run, closed after them.
 */
export function useWebApp(routes: Parameters<typeof servePages>[0]) {
  const web = {} as { container: Container; browser: Browser; url: string };
  let server: Server | undefined;
  beforeAll(async () => {
    web.container = await openContainer();
    web.browser = await launchChromium();
    const served = await servePages(routes);
    web.url = served.url;
    server = served.server;
  });
  afterAll(async () => {
    await web.browser?.close();
    server?.close();
    await web.container?.close();
  });
  return web;
}
