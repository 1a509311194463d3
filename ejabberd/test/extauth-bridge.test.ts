/**
 * The real bridge process, driven as ejabberd drives it: framed requests on stdin, replies on stdout,
 * against a stand-in control plane (or none at all).
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { frame } from './frames.js';

const BRIDGE = fileURLToPath(new URL('../extauth-bridge.mjs', import.meta.url));
const SECRET = 'internal-secret-0123456789abcdefghijklmnopqrstuv';

/** What each test started: stopped after it, whatever the outcome. */
const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

interface Received {
  method: string | undefined;
  url: string | undefined;
  authorization: string | undefined;
  body: unknown;
}

type Handler = (body: Record<string, unknown>, response: ServerResponse) => void;

/** A stand-in for the control plane's endpoint; records what it was asked. */
async function startControlPlane(handler: Handler, port = 0): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      received.push({
        method: request.method,
        url: request.url,
        authorization: request.headers.authorization,
        body,
      });
      handler(body, response);
    });
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
}

const json = (response: ServerResponse, status: number, body: string) => {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(body);
};

/** A loopback port that nothing listens on (bound for an instant, then released). */
async function closedPort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

interface Bridge {
  child: ChildProcessWithoutNullStreams;
  send(...requests: string[]): void;
  /** The verdicts of the first `count` replies (0 or 1), once they are all there. */
  replies(count: number): Promise<number[]>;
  stderr(): string;
}

function startBridge(config: string): Bridge {
  const dir = mkdtempSync(join(tmpdir(), 'extauth-bridge-'));
  const configFile = join(dir, 'extauth.json');
  writeFileSync(configFile, config);
  const child = spawn(process.execPath, [BRIDGE, configFile]);
  cleanups.push(() => {
    child.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  let stdout = Buffer.alloc(0);
  let stderr = '';
  const listeners: Array<() => void> = [];
  child.stdout.on('data', (chunk: Buffer) => {
    stdout = Buffer.concat([stdout, chunk]);
    for (const listener of listeners) listener();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  return {
    child,
    send: (...requests) => child.stdin.write(Buffer.concat(requests.map(frame))),
    replies: (count) =>
      new Promise((resolve) => {
        const check = () => {
          if (stdout.length < 4 * count) return;
          const verdicts: number[] = [];
          for (let offset = 0; offset < stdout.length; offset += 4) {
            // Every reply is exactly 00 02 00 0N; anything else on stdout breaks ejabberd's port.
            expect([...stdout.subarray(offset, offset + 3)]).toEqual([0, 2, 0]);
            verdicts.push(stdout[offset + 3] as number);
          }
          resolve(verdicts);
        };
        listeners.push(check);
        check();
      }),
    stderr: () => stderr,
  };
}

const configFor = (url: string) => JSON.stringify({ url, secret: SECRET });

describe('extauth bridge', () => {
  it('refuses every request at once while the control plane is unreachable, and exits when stdin closes', async () => {
    const bridge = startBridge(configFor(`http://127.0.0.1:${await closedPort()}`));
    const started = Date.now();
    bridge.send(
      'auth:abc123defg.ana:chat.local:secret:with:colons',
      'isuser:abc123defg.ana:chat.local',
      'auth:abc123defg.bo:chat.local:pw',
      'setpass:abc123defg.ana:chat.local:pw',
    );
    expect(await bridge.replies(4)).toEqual([0, 0, 0, 0]);
    expect(Date.now() - started).toBeLessThan(2_000);
    bridge.child.stdin.end();
    const [code] = await once(bridge.child, 'exit');
    expect(code).toBe(0);
    // One line for the outage, not one per request, and never a password.
    expect(bridge.stderr().match(/ECONNREFUSED/g)).toHaveLength(1);
    expect(bridge.stderr()).not.toContain('colons');
  });

  it('asks the control plane about auth and isuser, and answers in request order', async () => {
    const controlPlane = await startControlPlane((body, response) => {
      const ok = body.op === 'isuser' || body.password === 'p:w:d';
      // The first answer comes last: the replies must still leave in request order.
      setTimeout(() => json(response, 200, JSON.stringify({ ok })), body.user === 'abc123defg.ana' ? 200 : 0);
    });
    const bridge = startBridge(configFor(controlPlane.url));
    bridge.send(
      'auth:abc123defg.ana:chat.local:p:w:d',
      'auth:abc123defg.bo:chat.local:wrong',
      'isuser:abc123defg.cy:chat.local',
      'tryregister:abc123defg.dee:chat.local:pw',
      'removeuser:abc123defg.dee:chat.local',
      'removeuser3:abc123defg.dee:chat.local:pw',
      'certauth:abc123defg.dee:chat.local:cert',
    );
    expect(await bridge.replies(7)).toEqual([1, 0, 1, 0, 0, 0, 0]);
    const asked = controlPlane.received.map((request) => request.body);
    expect(asked).toHaveLength(3);
    expect(asked).toEqual(
      expect.arrayContaining([
        { op: 'auth', user: 'abc123defg.ana', server: 'chat.local', password: 'p:w:d' },
        { op: 'auth', user: 'abc123defg.bo', server: 'chat.local', password: 'wrong' },
        { op: 'isuser', user: 'abc123defg.cy', server: 'chat.local' },
      ]),
    );
    for (const request of controlPlane.received)
      expect(request).toMatchObject({
        method: 'POST',
        url: '/internal/ejabberd/auth',
        authorization: `Bearer ${SECRET}`,
      });
  });

  it('counts anything but a 200 with a boolean "ok" as a refusal', async () => {
    const answers = [
      [500, '{"ok":true}'],
      [200, 'not json'],
      [200, '{"ok":"yes"}'],
      [200, 'null'],
    ] as const;
    let next = 0;
    const controlPlane = await startControlPlane((_body, response) => {
      const [status, body] = answers[next++ % answers.length]!;
      json(response, status, body);
    });
    const bridge = startBridge(configFor(controlPlane.url));
    for (let index = 0; index < answers.length; index++) {
      bridge.send('auth:abc123defg.ana:chat.local:pw');
      await bridge.replies(index + 1);
    }
    expect(await bridge.replies(answers.length)).toEqual([0, 0, 0, 0]);
  });

  it('refuses after 5 s without an answer, and accepts again once the control plane is back', async () => {
    const port = await closedPort();
    const bridge = startBridge(configFor(`http://127.0.0.1:${port}`));
    bridge.send('auth:abc123defg.ana:chat.local:pw');
    expect(await bridge.replies(1)).toEqual([0]);

    let hang = true;
    await startControlPlane((_body, response) => {
      if (!hang) json(response, 200, '{"ok":true}');
    }, port);
    const started = Date.now();
    bridge.send('auth:abc123defg.ana:chat.local:pw');
    expect(await bridge.replies(2)).toEqual([0, 0]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_900);
    expect(bridge.stderr()).toContain('no answer within 5 s');

    hang = false;
    bridge.send('auth:abc123defg.ana:chat.local:pw');
    expect(await bridge.replies(3)).toEqual([0, 0, 1]);
    expect(bridge.stderr()).toContain('the control plane answers again');
  }, 15_000);

  it('stops at start on a config it cannot use, without printing the file', async () => {
    const bridge = startBridge(`{"url": "http://127.0.0.1:1", "secret": "${SECRET}"`);
    const [code] = await once(bridge.child, 'exit');
    expect(code).toBe(1);
    expect(bridge.stderr()).toContain('is not valid JSON');
    expect(bridge.stderr()).not.toContain(SECRET);

    const noSecret = startBridge('{"url": "http://127.0.0.1:1"}');
    expect((await once(noSecret.child, 'exit'))[0]).toBe(1);
    expect(noSecret.stderr()).toContain('"secret" must be a non-empty string');
  });
});
