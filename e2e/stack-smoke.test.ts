/**
 * The test stack's servers answer as the control plane expects: ejabberd's API and XMPP WebSocket,
 * LiveKit's health and room service (with the stack's key), MinIO's readiness. Reads the SVC_*
 * settings that `npm test` (or vitest.config.ts, from .stack/test/control-plane.env) provides.
 */
import { RoomServiceClient } from 'livekit-server-sdk';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';

function setting(name: string): string {
  const value = process.env[name];
  if (!value)
    throw new Error(`${name} is not set: start the test stack (npm run stack -- up --profile test)`);
  return value;
}

/** Opens a WebSocket and reports the handshake's HTTP status and the negotiated subprotocol. */
function handshake(url: string, protocol: string): Promise<{ status: number; protocol: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, protocol);
    let status = 0;
    socket.once('upgrade', (response) => {
      status = response.statusCode ?? 0;
    });
    socket.once('open', () => {
      resolve({ status, protocol: socket.protocol });
      socket.close();
    });
    socket.once('unexpected-response', (_request, response) =>
      resolve({ status: response.statusCode ?? 0, protocol: '' }),
    );
    socket.once('error', reject);
  });
}

describe('ejabberd', () => {
  it('answers the HTTP API status command', async () => {
    const response = await fetch(`${setting('SVC_EJABBERD_API_URL')}/status`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(response.status).toBe(200);
  });

  it('upgrades an XMPP WebSocket', async () => {
    expect(await handshake(setting('SVC_CHAT_WS_URL'), 'xmpp')).toEqual({ status: 101, protocol: 'xmpp' });
  });
});

describe('LiveKit', () => {
  it('is ready', async () => {
    expect((await fetch(`${setting('SVC_LIVEKIT_URL')}/`)).status).toBe(200);
  });

  it('accepts the stack key on its room service', async () => {
    const rooms = new RoomServiceClient(
      setting('SVC_LIVEKIT_URL'),
      setting('SVC_LIVEKIT_API_KEY'),
      setting('SVC_LIVEKIT_API_SECRET'),
    );
    expect(Array.isArray(await rooms.listRooms())).toBe(true);
  });
});

describe('MinIO', () => {
  it('is ready', async () => {
    expect((await fetch(`${setting('SVC_S3_ENDPOINT')}/minio/health/ready`)).status).toBe(200);
  });
});
