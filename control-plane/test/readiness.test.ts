import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callWithKey, createCustomer, freePort, startTestApp, type TestContext } from './support.js';

let redis: ChildProcess;
let ctx: TestContext;

beforeAll(async () => {
  // A real Redis of this test's own, so that stopping it leaves the shared test Redis alone.
  const port = await freePort();
  redis = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  ctx = await startTestApp({ settings: { SVC_REDIS_URL: `redis://127.0.0.1:${port}/0` } });
  await ctx.container.redis.ping();
});
afterAll(async () => {
  redis.kill('SIGKILL');
  await ctx.close();
});

describe('/readyz', () => {
  it('is ready while PostgreSQL, Redis, ejabberd, LiveKit and MinIO answer, and fails when Redis stops', async () => {
    const customer = await createCustomer(ctx.container);
    const ready = await ctx.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.json()).toEqual({
      status: 'ready',
      checks: { postgres: 'ok', redis: 'ok', ejabberd: 'ok', livekit: 'ok', minio: 'ok' },
    });
    expect(ready.statusCode).toBe(200);

    redis.kill('SIGTERM');
    await once(redis, 'exit');
    // The probes answer for a second: the next round finds Redis down.
    const deadline = Date.now() + 5_000;
    let down = await ctx.app.inject({ method: 'GET', url: '/readyz' });
    while (down.statusCode === 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      down = await ctx.app.inject({ method: 'GET', url: '/readyz' });
    }
    expect(down.statusCode).toBe(503);
    expect(down.json()).toEqual({
      status: 'unavailable',
      checks: { postgres: 'ok', redis: 'down', ejabberd: 'ok', livekit: 'ok', minio: 'ok' },
    });
    // The process itself is alive, so /healthz stays 200 (no supervisor restarts it) and names Redis.
    const health = await ctx.app.inject({ method: 'GET', url: '/healthz' });
    expect(health.statusCode).toBe(200);
    expect(health.json()).toMatchObject({ status: 'degraded', down: ['redis'] });
    // A request that needs Redis (its key check does) is a 503 to retry, in the spec's error body.
    const call = await callWithKey(ctx.app, customer.token, 'GET', '/v1/realtime/balance');
    expect(call.statusCode).toBe(503);
    expect(call.headers['retry-after']).toBe('1');
    expect(call.json()).toEqual({
      error: { type: 'service_unavailable', message: 'Redis is unavailable; try again shortly' },
    });
  });
});
