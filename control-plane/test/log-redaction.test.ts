import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realtimeStore } from '../src/modules/realtime/store.js';
import { newSecret } from '../src/platform/secrets.js';
import { startTestApp, type TestContext } from './support.js';

const lines: string[] = [];
const secret = newSecret('shs_');
let ctx: TestContext;

beforeAll(async () => {
  ctx = await startTestApp({
    logStream: { write: (line) => void lines.push(line) },
    extraRoutes: (app) => {
      // A failed write of app settings: its parameters include the shield secret.
      app.post('/test/leak/settings', async () => {
        await realtimeStore(ctx.container.pool).insert({
          appId: 'app_that_does_not_exist',
          mode: 'live',
          chatPrefix: 'leak',
          publishableKeyId: 'key_none',
          shieldSecret: secret,
          mam: true,
          products: ['chat'],
          maxRoomSize: 10,
          at: new Date(),
        });
      });
      // PostgreSQL quotes the parameter in its message: invalid input syntax for type integer: "shs_…".
      app.post('/test/leak/syntax', async () => {
        await ctx.container.pool.query(sql.unsafe`select ${secret}::int`);
      });
    },
  });
});
afterAll(async () => {
  await ctx.close();
});

describe('a failed statement in the log', () => {
  it.each(['settings', 'syntax'])('of %s is logged without its parameters', async (kind) => {
    lines.length = 0;
    const response = await ctx.app.inject({ method: 'POST', url: `/test/leak/${kind}` });
    expect(response.statusCode).toBe(500);
    expect(response.body).not.toContain(secret);
    const failed = lines.map((line) => JSON.parse(line)).find((line) => line.msg === 'request failed');
    // Still useful: the error and where PostgreSQL quoted the parameter, which is replaced.
    expect(failed?.err).toMatchObject({ type: expect.any(String), message: expect.any(String) });
    expect(JSON.stringify(failed?.err)).toContain('[redacted]');
    expect(lines.join('\n')).not.toContain(secret);
    expect(lines.join('\n')).not.toContain(secret.slice(4, 20));
  });
});

describe('a dashboard invitation link in the log', () => {
  it('is logged without its token, and its request is still described', async () => {
    const customer = await ctx.container.accounts.createAccount({ name: 'Logged', plan: 'pro' });
    const { token } = await ctx.container.dashboard.inviteOwner(
      customer.id,
      `logged${Date.now()}@example.com`,
    );
    lines.length = 0;
    const response = await ctx.app.inject({ method: 'GET', url: `/dashboard/invitations/${token}?x=1` });
    expect(response.statusCode).toBe(200);
    expect(lines.join('\n')).not.toContain(token);
    const incoming = lines.map((line) => JSON.parse(line)).find((line) => line.msg === 'incoming request');
    expect(incoming?.req).toMatchObject({ method: 'GET', url: '/dashboard/invitations/…?x=1' });
  });
});
