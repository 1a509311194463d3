import { connect } from 'node:net';

const PROBE_TIMEOUT_MS = 2_000;

/** True when the URL answers 200; any network error or other status is "not healthy yet". */
export async function httpOk(url: string, init: RequestInit = {}): Promise<boolean> {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await response.body?.cancel();
    return response.status === 200;
  } catch {
    return false;
  }
}

/** AUTH then PING over a raw socket: needs no redis-cli and never puts the password on a command line. */
export function redisPing(port: number, password: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let reply = '';
    const finish = (healthy: boolean) => {
      socket.destroy();
      resolve(healthy);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('connect', () => socket.write(`AUTH ${password}\r\nPING\r\n`));
    socket.setEncoding('utf8').on('data', (chunk: string) => {
      reply += chunk;
      if (reply.startsWith('-') || reply.includes('\r\n-')) finish(false);
      else if (reply === '+OK\r\n+PONG\r\n') finish(true);
    });
  });
}

/** True when something accepts a TCP connection on the loopback port; the connection is closed at once. */
export function tcpListening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const finish = (listening: boolean) => {
      socket.destroy();
      resolve(listening);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => finish(false));
    socket.once('error', () => finish(false));
    socket.once('connect', () => finish(true));
  });
}
