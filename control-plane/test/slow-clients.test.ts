import { once } from 'node:events';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomer, startTestApp, type TestContext } from './support.js';

const TIMEOUT_MS = 1_500;
let ctx: TestContext;
let port: number;

beforeAll(async () => {
  ctx = await startTestApp({ settings: { SVC_REQUEST_TIMEOUT_MS: TIMEOUT_MS } });
  await ctx.app.listen({ host: '127.0.0.1', port: 0 });
  port = (ctx.app.server.address() as AddressInfo).port;
});
afterAll(async () => {
  await ctx.close();
});

/** Sends `start`, then a byte of `drip` every 200 ms; resolves with what the server answered and when. */
async function trickle(start: string, drip: string) {
  const socket: Socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const began = Date.now();
  let received = '';
  socket.on('data', (chunk) => {
    received += chunk.toString();
  });
  socket.write(start);
  let sent = 0;
  const timer = setInterval(() => {
    if (sent < drip.length && !socket.destroyed) socket.write(drip[sent++]!);
  }, 200);
  await once(socket, 'close');
  clearInterval(timer);
  return { received, afterMs: Date.now() - began, sentAll: sent === drip.length };
}

describe('a slow client', () => {
  it('trickling its headers is cut off with 408', async () => {
    const { received, afterMs } = await trickle(
      'GET /v1/pricing HTTP/1.1\r\nHost: x\r\n',
      'X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
    );
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
    expect(afterMs).toBeLessThan(TIMEOUT_MS + 1_500);
  });

  it('trickling its body is cut off with 408 before it is read', async () => {
    // A valid key, so that the request gets as far as reading its body.
    const { token } = await createCustomer(ctx.container);
    const body = JSON.stringify({ user_id: 'u'.repeat(40) });
    const { received, afterMs, sentAll } = await trickle(
      `POST /v1/realtime/chat/tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      body,
    );
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
    expect(sentAll).toBe(false);
    expect(afterMs).toBeGreaterThanOrEqual(TIMEOUT_MS);
    expect(afterMs).toBeLessThan(TIMEOUT_MS + 2_000);
  });
});
