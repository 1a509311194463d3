import { once } from 'node:events';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { tcpListening } from '../src/health.js';

describe('tcpListening', () => {
  it('is true while something accepts connections on the port, false once it stops', async () => {
    const server = createServer((socket) => socket.end()).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    expect(await tcpListening(port)).toBe(true);
    server.close();
    await once(server, 'close');
    expect(await tcpListening(port)).toBe(false);
  });
});
