import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createWebhookSender,
  type WebhookRequest,
  type WebhookSender,
  type WebhookSenderOptions,
} from '../src/adapters/webhook-sender.js';

interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  /** Header names as sent, once per header line. */
  headerNames: string[];
  body: string;
}

interface Receiver {
  port: number;
  url: string;
  received: Received[];
  /** TCP connections accepted, whether or not a request came over them. */
  connections: number;
  /** Resolves when the socket of the last response closes. */
  lastResponseClosed: Promise<void>;
}

const servers: Server[] = [];
const senders: WebhookSender[] = [];

afterEach(async () => {
  for (const sender of senders.splice(0)) sender.close();
  await Promise.all(
    servers.splice(0).map((server) => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    }),
  );
});

/** A real receiver on loopback that records each request in full, then lets `answer` reply. */
async function receiver(
  answer: (response: ServerResponse, request: Received) => void,
  server: Server = createServer(),
): Promise<Receiver> {
  let closed: () => void = () => {};
  const state: Receiver = {
    port: 0,
    url: '',
    received: [],
    connections: 0,
    lastResponseClosed: new Promise((resolve) => {
      closed = resolve;
    }),
  };
  server.on('connection', () => {
    state.connections += 1;
  });
  server.on('request', async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const received = {
      method: request.method ?? '',
      url: request.url ?? '',
      headers: request.headers,
      headerNames: request.rawHeaders.filter((_value, index) => index % 2 === 0).map((n) => n.toLowerCase()),
      body: Buffer.concat(chunks).toString(),
    };
    state.received.push(received);
    response.on('close', () => closed());
    answer(response, received);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  state.port = (server.address() as AddressInfo).port;
  state.url = `http://127.0.0.1:${state.port}/hooks/in?x=1`;
  return state;
}

function sender(options: Partial<WebhookSenderOptions> = {}): WebhookSender {
  const created = createWebhookSender({
    timeoutMs: 5_000,
    excerptBytes: 1_024,
    allowedNetworks: ['127.0.0.0/8'],
    userAgent: 'svc-webhooks/1 (test)',
    ...options,
  });
  senders.push(created);
  return created;
}

function delivery(url: string, body = '{"type":"ping"}'): WebhookRequest {
  return { url, headers: { 'X-Signature': 'v1=abc' }, body };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a webhook delivery', () => {
  it('POSTs the JSON body to the path and query with the caller headers, Host, User-Agent and Content-Length, and keeps the answer', async () => {
    const target = await receiver((response, request) => response.end(`ok: ${request.body}`));
    const outcome = await sender().send(delivery(target.url, '{"note":"été"}'));

    expect(outcome).toEqual({
      kind: 'response',
      status: 200,
      latencyMs: expect.any(Number),
      excerpt: 'ok: {"note":"été"}',
    });
    const [request] = target.received;
    expect(request?.method).toBe('POST');
    expect(request?.url).toBe('/hooks/in?x=1');
    expect(request?.body).toBe('{"note":"été"}');
    expect(request?.headers).toMatchObject({
      'content-type': 'application/json',
      'x-signature': 'v1=abc',
      'user-agent': 'svc-webhooks/1 (test)',
      'content-length': String(Buffer.byteLength('{"note":"été"}')),
      host: `127.0.0.1:${target.port}`,
    });
    // Each once, and the connection kept alive for the next delivery.
    expect(request?.headerNames.sort()).toEqual(
      ['connection', 'content-length', 'content-type', 'host', 'user-agent', 'x-signature'].sort(),
    );
    expect(request?.headers.connection).toBe('keep-alive');
  });

  it('reports a 500 as a response with its body', async () => {
    const target = await receiver((response) => {
      response.statusCode = 500;
      response.end('database down');
    });
    expect(await sender().send(delivery(target.url))).toMatchObject({
      kind: 'response',
      status: 500,
      excerpt: 'database down',
    });
  });

  it('decodes the excerpt as UTF-8, replacing bad bytes', async () => {
    const target = await receiver((response) => response.end(Buffer.from([0x68, 0x69, 0xff, 0x21])));
    expect(await sender().send(delivery(target.url))).toMatchObject({ excerpt: 'hi\uFFFD!' });
  });

  it('keeps only excerptBytes of an endless body, and drops the connection', async () => {
    const target = await receiver((response) => {
      const drip = setInterval(() => response.write('x'.repeat(700)), 5);
      response.on('close', () => clearInterval(drip));
    });
    const outcome = await sender({ excerptBytes: 1_024 }).send(delivery(target.url));

    expect(outcome).toMatchObject({ kind: 'response', status: 200, excerpt: 'x'.repeat(1_024) });
    expect(outcome.latencyMs).toBeLessThan(1_000);
    await target.lastResponseClosed;
  });

  it('does not follow a redirect', async () => {
    const elsewhere = await receiver((response) => response.end('should not be reached'));
    const target = await receiver((response) => {
      response.writeHead(302, { Location: elsewhere.url });
      response.end();
    });
    expect(await sender().send(delivery(target.url))).toMatchObject({
      kind: 'response',
      status: 302,
      excerpt: '',
    });
    await sleep(100);
    expect(elsewhere.connections).toBe(0);
  });

  it('reuses the connection for the next delivery to the same receiver', async () => {
    const target = await receiver((response) => response.end('ok'));
    const webhooks = sender();
    for (let i = 0; i < 3; i++)
      expect(await webhooks.send(delivery(target.url))).toMatchObject({ status: 200 });
    expect(target.received).toHaveLength(3);
    expect(target.connections).toBe(1);
  });
});

describe('a slow receiver', () => {
  it('times out when the answer takes longer than timeoutMs', async () => {
    const target = await receiver((response) => {
      setTimeout(() => response.end('late'), 1_000);
    });
    const outcome = await sender({ timeoutMs: 300 }).send(delivery(target.url));

    expect(outcome).toMatchObject({ kind: 'failure', reason: 'timeout' });
    expect(outcome.latencyMs).toBeGreaterThanOrEqual(299);
    expect(outcome.latencyMs).toBeLessThan(900);
  });

  it('times out when the body trickles in below the cap: the read counts toward the attempt', async () => {
    const target = await receiver((response) => {
      response.flushHeaders();
      const drip = setInterval(() => response.write('.'), 50);
      response.on('close', () => clearInterval(drip));
    });
    const outcome = await sender({ timeoutMs: 300 }).send(delivery(target.url));

    expect(outcome).toMatchObject({ kind: 'failure', reason: 'timeout' });
    await target.lastResponseClosed;
  });

  it('times out at the spec 5 s against a 6 s answer', async () => {
    const target = await receiver((response) => {
      setTimeout(() => response.end('late'), 6_000);
    });
    const outcome = await sender({ timeoutMs: 5_000 }).send(delivery(target.url));

    expect(outcome).toMatchObject({ kind: 'failure', reason: 'timeout' });
    expect(outcome.latencyMs).toBeGreaterThanOrEqual(4_999);
    expect(outcome.latencyMs).toBeLessThan(5_900);
  }, 10_000);
});

describe('a forbidden address', () => {
  it('given as an IP literal is refused without connecting, unless allow-listed', async () => {
    const target = await receiver((response) => response.end('ok'));
    const strict = sender({ allowedNetworks: [] });

    for (const url of [
      target.url,
      `http://[::ffff:127.0.0.1]:${target.port}/`,
      `http://2130706433:${target.port}/`,
      `http://0x7f.1:${target.port}/`,
    ]) {
      expect(await strict.send(delivery(url))).toMatchObject({
        kind: 'failure',
        reason: 'forbidden-address',
      });
    }
    await sleep(100);
    expect(target.connections).toBe(0);

    expect(await sender({ allowedNetworks: ['127.0.0.0/8'] }).send(delivery(target.url))).toMatchObject({
      kind: 'response',
      status: 200,
    });
  });

  it('behind a hostname is refused at delivery time, unless allow-listed', async () => {
    const target = await receiver((response) => response.end('ok'));
    const url = `http://localhost:${target.port}/hooks`;

    expect(await sender({ allowedNetworks: [] }).send(delivery(url))).toMatchObject({
      kind: 'failure',
      reason: 'forbidden-address',
      message: expect.stringMatching(/^localhost resolves to /),
    });
    await sleep(100);
    expect(target.connections).toBe(0);

    expect(await sender({ allowedNetworks: ['127.0.0.0/8', '::1/128'] }).send(delivery(url))).toMatchObject({
      kind: 'response',
      status: 200,
    });
    expect(target.received).toHaveLength(1);
  });
});

describe('a delivery that cannot be made', () => {
  it.each([
    'ftp://x',
    'http://user:pw@example.com/',
    'https://:pw@example.com/',
    'file:///etc/passwd',
    'not a url',
    '',
  ])('to %j is an invalid URL', async (url) => {
    expect(await sender().send(delivery(url))).toMatchObject({ kind: 'failure', reason: 'invalid-url' });
  });

  it('to a closed port is a connection failure', async () => {
    const closed = await receiver(() => {});
    const server = servers.pop()!;
    await new Promise((resolve) => server.close(resolve));

    expect(await sender().send(delivery(closed.url))).toMatchObject({
      kind: 'failure',
      reason: 'connection',
      message: expect.stringContaining('ECONNREFUSED'),
    });
  });

  it('to a receiver whose certificate is not trusted is a TLS failure', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'webhook-tls-'));
    try {
      execFileSync(
        'openssl',
        ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
          .concat(['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1'])
          .concat(['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1']),
        { stdio: 'ignore' },
      );
      const server = createTlsServer({
        key: readFileSync(join(dir, 'key.pem')),
        cert: readFileSync(join(dir, 'cert.pem')),
      });
      const target = await receiver((response) => response.end('ok'), server);

      expect(await sender().send(delivery(`https://127.0.0.1:${target.port}/`))).toMatchObject({
        kind: 'failure',
        reason: 'tls',
        message: 'self-signed certificate',
      });
      expect(target.received).toHaveLength(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('over https to a plain HTTP receiver is a TLS failure', async () => {
    const target = await receiver((response) => response.end('ok'));
    expect(await sender().send(delivery(`https://127.0.0.1:${target.port}/`))).toMatchObject({
      kind: 'failure',
      reason: 'tls',
    });
  });
});
