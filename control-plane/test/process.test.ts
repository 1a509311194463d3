import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { freePort } from './support.js';

const TSX = new URL('../../node_modules/.bin/tsx', import.meta.url).pathname;
const MAIN = new URL('../src/main.ts', import.meta.url).pathname;

function startMain(env: NodeJS.ProcessEnv): { child: ChildProcess; output: () => string } {
  const child = spawn(TSX, [MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  return { child, output: () => output };
}

async function waitForHealth(url: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url} never became healthy`);
}

describe('the control-plane process', () => {
  it('refuses to start on bad settings, naming each one, and never printing a secret', async () => {
    const { child, output } = startMain({
      ...process.env,
      SVC_PORT: 'eighty',
      SVC_EJABBERD_AUTH_SECRET: 'too-short-secret',
      SVC_REDIS_URL: '',
    });
    const [code] = await once(child, 'exit');
    expect(code).toBe(78);
    expect(output()).toMatch(/SVC_PORT: /);
    expect(output()).toMatch(/SVC_EJABBERD_AUTH_SECRET: /);
    expect(output()).toMatch(/SVC_REDIS_URL: required/);
    expect(output()).not.toContain('too-short-secret');
  });

  it('refuses to start without its ffprobe, naming the setting and the path', async () => {
    const missing = '/nonexistent/ffprobe-svc';
    const { child, output } = startMain({
      ...process.env,
      SVC_PORT: String(await freePort()),
      SVC_INTERNAL_PORT: String(await freePort()),
      SVC_FFPROBE_PATH: missing,
    });
    const [code] = await once(child, 'exit');
    expect(code).toBe(1);
    expect(output()).toContain(`the ffprobe of SVC_FFPROBE_PATH (${missing}) are needed`);
    expect(output()).toMatch(/ENOENT/);
  });

  it('serves on its two listeners, logs requests with ids but without keys, and drains on SIGTERM', async () => {
    const [port, internalPort] = [await freePort(), await freePort()];
    const { child, output } = startMain({
      ...process.env,
      SVC_PORT: String(port),
      SVC_INTERNAL_PORT: String(internalPort),
      SVC_LOG_LEVEL: 'info',
    });
    const base = `http://127.0.0.1:${port}`;
    await waitForHealth(`${base}/healthz`);
    const metrics = await fetch(`http://127.0.0.1:${internalPort}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('svc_http_requests_total');
    expect((await fetch(`${base}/metrics`)).status).toBe(404);
    const key = `svc_test_${'Z'.repeat(32)}`;
    const response = await fetch(`${base}/v1/realtime/balance`, {
      headers: { authorization: `Bearer ${key}`, 'x-request-id': 'trace-me-42' },
    });
    expect(response.status).toBe(401);
    expect(response.headers.get('x-svc-cost-usd')).toBe('0.000000');

    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    expect(output()).toContain('"reqId":"trace-me-42"');
    expect(output()).toContain('shutting down');
    expect(output()).not.toContain(key);
  });
});
