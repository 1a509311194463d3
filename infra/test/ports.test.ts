import { once } from 'node:events';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { assertPortsFree, portBase, portMap } from '../src/ports.js';

describe('port map', () => {
  it('gives each profile its own block', () => {
    expect(portBase('dev', {})).toBe(27000);
    expect(portBase('test', {})).toBe(28000);
  });

  it('places every server at its fixed offset from the base', () => {
    expect(portMap(48000)).toEqual({
      controlPlane: 48000,
      postgres: 48001,
      redis: 48002,
      ejabberdWebSocket: 48003,
      ejabberdApi: 48004,
      livekitHttp: 48005,
      livekitRtcTcp: 48006,
      livekitRtcUdp: 48007,
      minioS3: 48008,
      minioConsole: 48009,
      ejabberdDistribution: 48010,
      controlPlaneInternal: 48011,
      ejabberdComponent: 48012,
      aiLlm: 48013,
      aiModeration: 48014,
    });
  });

  it('lets SVC_STACK_PORT_BASE move the whole block', () => {
    expect(portBase('dev', { SVC_STACK_PORT_BASE: '52000' })).toBe(52000);
    expect(portBase('test', { SVC_STACK_PORT_BASE: '' })).toBe(28000);
  });

  it.each(['abc', '80', '65530', '47000.5'])('refuses the base "%s"', (base) => {
    expect(() => portBase('dev', { SVC_STACK_PORT_BASE: base })).toThrow(/SVC_STACK_PORT_BASE/);
  });

  it('names a port that another process holds', async () => {
    const holder = createServer().listen(0, '127.0.0.1');
    await once(holder, 'listening');
    const { port } = holder.address() as { port: number };
    try {
      const ports = portMap(port - 1); // puts "postgres" (offset 1) on the held port
      await expect(assertPortsFree(['postgres'], ports)).rejects.toThrow(`port ${port}/tcp (PostgreSQL)`);
    } finally {
      holder.close();
    }
  });
});
