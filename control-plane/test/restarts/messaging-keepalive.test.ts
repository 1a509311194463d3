import { once } from 'node:events';
import { createServer, type Socket, connect as tcpConnect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, expect, it } from 'vitest';
import { createMessagingComponent } from '../../src/adapters/messaging-component.js';
import { loadSettings } from '../../src/config/load.js';

// Runs with the restarts project, one file at a time after every other: a second component connected
// for the messaging domain would take a share of the stanzas ejabberd routes to the test stack's own.

/** How long the relay lets a connection sit idle in both directions, as HAProxy's tunnel timeout does. */
const IDLE_MS = 400;

/**
 * A TCP relay to ejabberd's component port that cuts a connection idle for IDLE_MS: a proxy such as
 * the scale profile's between the control plane and ejabberd.
 */
async function idleCuttingRelay(target: URL) {
  let cuts = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = tcpConnect(Number(target.port), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
    }
    let idleSince = Date.now();
    const touch = () => {
      idleSince = Date.now();
    };
    client.on('data', touch).pipe(upstream);
    upstream.on('data', touch).pipe(client);
    const timer = setInterval(() => {
      if (Date.now() - idleSince < IDLE_MS) return;
      cuts += 1;
      clearInterval(timer);
      client.destroy();
      upstream.destroy();
    }, 50);
    client.on('close', () => clearInterval(timer));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return {
    url: `xmpp://127.0.0.1:${port}`,
    cuts: () => cuts,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

const settings = loadSettings(process.env);
const closers: (() => unknown)[] = [];
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

async function componentThrough(relayUrl: string, keepaliveMs: number) {
  const component = createMessagingComponent({
    url: relayUrl,
    domain: settings.SVC_MESSAGING_DOMAIN,
    secret: settings.SVC_MESSAGING_COMPONENT_SECRET,
    chatDomain: settings.SVC_CHAT_DOMAIN,
    onError: () => {},
    keepaliveMs,
  });
  closers.push(() => component.stop());
  await component.start();
  return component;
}

it('keeps its stream through a proxy that cuts idle connections, with a whitespace keepalive', async () => {
  const target = new URL(settings.SVC_MESSAGING_COMPONENT_URL);
  const quiet = await idleCuttingRelay(target);
  closers.push(quiet.close);
  const kept = await idleCuttingRelay(target);
  closers.push(kept.close);

  // Without keepalives within the idle limit, the relay cuts the stream; with them, it never does.
  await componentThrough(quiet.url, 60_000);
  const alive = await componentThrough(kept.url, IDLE_MS / 4);
  expect(alive.status()).toBe('online');
  await sleep(IDLE_MS * 4);
  expect(quiet.cuts()).toBeGreaterThan(0);
  expect(kept.cuts()).toBe(0);
  expect(alive.status()).toBe('online');
});
