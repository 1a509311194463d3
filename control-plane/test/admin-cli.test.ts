import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

const run = promisify(execFile);
const TSX = new URL('../../node_modules/.bin/tsx', import.meta.url).pathname;
const ADMIN = new URL('../src/cli/admin.ts', import.meta.url).pathname;

/** Runs the admin CLI as an operator would, returning its exit code, JSON output and errors. */
async function admin(...args: string[]) {
  try {
    const { stdout, stderr } = await run(TSX, [ADMIN, ...args], { env: process.env });
    return { code: 0, json: JSON.parse(stdout), stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, json: null, stderr: failed.stderr };
  }
}

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

// Each call starts a process that compiles the CLI's TypeScript: seconds each on a busy machine.
describe('npm run admin', { timeout: 120_000 }, () => {
  it('creates an account, an app and keys, tops up idempotently and revokes', async () => {
    const account = await admin('account', 'create', '--name', 'Acme', '--plan', 'pro');
    expect(account.code).toBe(0);
    expect(account.json).toMatchObject({ name: 'Acme', plan: 'pro', balance_micros: 0 });
    const app = await admin('app', 'create', '--account', account.json.id, '--name', 'web');
    expect(app.json.account_id).toBe(account.json.id);

    const key = await admin('key', 'create', '--app', app.json.id, '--mode', 'live');
    expect(key.json.token).toMatch(/^svc_live_[0-9A-Za-z]{32}$/);
    expect(key.json.note).toMatch(/not shown again/);
    const stored = await ctx.container.pool.one(
      sql.type(
        z.object({ token_hash: z.instanceof(Buffer), token_hint: z.string(), publishable_token: z.null() }),
      )`
        select token_hash, token_hint, publishable_token from api_keys where id = ${key.json.id}`,
    );
    expect(stored.token_hash).toHaveLength(32);
    expect(stored.token_hint).toBe(`svc_live_…${key.json.token.slice(-4)}`);
    const listed = await admin('key', 'list', '--app', app.json.id);
    expect(JSON.stringify(listed.json)).not.toContain(key.json.token);

    const publishable = await admin(
      'key',
      'create',
      '--app',
      app.json.id,
      '--mode',
      'test',
      '--kind',
      'publishable',
    );
    expect(publishable.json.token).toMatch(/^pk_test_[0-9A-Za-z]{32}$/);

    const topUp = [
      'balance',
      'topup',
      '--account',
      account.json.id,
      '--amount-usd',
      '12.50',
      '--reference',
      'wire-7',
    ];
    expect((await admin(...topUp)).json).toMatchObject({ amount_micros: 12_500_000, replayed: false });
    expect((await admin(...topUp)).json).toMatchObject({ amount_micros: 12_500_000, replayed: true });
    expect((await admin('balance', 'show', '--account', account.json.id)).json.balance_micros).toBe(
      12_500_000,
    );

    const call = () =>
      ctx.app.inject({
        method: 'GET',
        url: '/v1/realtime/balance',
        headers: { 'x-api-key': key.json.token },
        remoteAddress: uniqueAddress(),
      });
    expect((await call()).statusCode).toBe(200);
    expect((await admin('key', 'revoke', '--key', key.json.id)).json.revoked_at).not.toBeNull();
    expect((await call()).statusCode).toBe(401);
  });

  it('explains bad usage with exit code 2', async () => {
    const missing = await admin('account', 'create');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/--name is required/);
    const plan = await admin('account', 'create', '--name', 'x', '--plan', 'gold');
    expect(plan.stderr).toMatch(/--plan must be one of free, pro, scale/);
    const amount = await admin(
      'balance',
      'topup',
      '--account',
      'acct_x',
      '--amount-usd',
      '1.2345678',
      '--reference',
      'r',
    );
    expect(amount.code).toBe(2);
    expect(amount.stderr).toMatch(/at most 6 decimals/);
    const unknown = await admin('account', 'delete');
    expect(unknown.stderr).toMatch(/unknown command "account delete"/);
  });

  it('invites an account’s first dashboard owner with a link that works once', async () => {
    const account = await ctx.container.accounts.createAccount({ name: 'Dash', plan: 'pro' });
    const invited = await admin(
      'dashboard',
      'invite',
      '--account',
      account.id,
      '--email',
      'First@Example.com',
    );
    expect(invited.code).toBe(0);
    expect(invited.json).toMatchObject({ account_id: account.id, email: 'first@example.com', role: 'owner' });
    const token = /\/dashboard\/invitations\/(dinv_\w+)$/.exec(invited.json.url)![1]!;
    expect(await ctx.container.dashboard.openInvite(token)).toMatchObject({ id: invited.json.id });
    expect(JSON.stringify(invited.json)).not.toContain('token_hash');

    const nobody = await admin('dashboard', 'invite', '--account', 'acct_nobody', '--email', 'a@b.c');
    expect(nobody.code).toBe(2);
    expect(nobody.stderr).toMatch(/Account acct_nobody not found/);
    const badEmail = await admin('dashboard', 'invite', '--account', account.id, '--email', 'not an email');
    expect(badEmail.code).toBe(2);
    expect(badEmail.stderr).toMatch(/email must be an email address/);
  });

  it('registers, lists, changes, rotates and tests webhook endpoints, the secret shown once', async () => {
    const { app } = await createCustomer(ctx.container);
    const scope = ['--app', app.id, '--mode', 'test'];
    // A reserved name: the running control plane's worker may try it, and reaches nothing.
    const url = 'https://receiver.invalid/hooks';
    const created = await admin(
      'webhook',
      'create',
      ...scope,
      '--url',
      url,
      '--events',
      'buzz.created,balance.low',
      '--profiles',
      'user-1,user-2',
      '--description',
      'Orders',
    );
    expect(created.code).toBe(0);
    expect(created.json).toMatchObject({
      url,
      event_types: ['buzz.created', 'balance.low'],
      profile_ids: ['user-1', 'user-2'],
      description: 'Orders',
      enabled: true,
    });
    expect(created.json.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(created.json.note).toMatch(/not shown again/);
    const id: string = created.json.id;

    // Another in the same mode, one in the other: list shows this mode's, every one of them.
    const other = await ctx.container.webhooks.create(
      { appId: app.id, mode: 'test' },
      { url, event_types: ['otp.delivered'] },
    );
    await ctx.container.webhooks.create(
      { appId: app.id, mode: 'live' },
      { url, event_types: ['otp.delivered'] },
    );
    const listed = await admin('webhook', 'list', ...scope);
    expect(listed.json.map((endpoint: { id: string }) => endpoint.id).sort()).toEqual([id, other.id].sort());
    expect(JSON.stringify(listed.json)).not.toContain(created.json.secret);

    const rotated = await admin('webhook', 'rotate', ...scope, '--endpoint', id);
    expect(rotated.json.secret).toMatch(/^whsec_/);
    expect(rotated.json.secret).not.toBe(created.json.secret);
    expect(rotated.json.note).toMatch(/not shown again/);
    const shown = await admin('webhook', 'show', ...scope, '--endpoint', id);
    expect(shown.json.secret).toBeUndefined();
    expect(shown.json.secret_hint).toBe(rotated.json.secret_hint);

    const updated = await admin(
      'webhook',
      'update',
      ...scope,
      '--endpoint',
      id,
      '--all-profiles',
      '--disable',
    );
    expect(updated.json).toMatchObject({ id, profile_ids: null, enabled: false });

    const ping = await admin('webhook', 'test', ...scope, '--endpoint', id);
    expect(ping.json).toMatchObject({ event_type: 'ping', status: 'pending' });
    expect(ping.json.note).toMatch(/delivery worker sends it/);
    const deliveries = await admin('webhook', 'deliveries', ...scope, '--endpoint', id);
    expect(deliveries.json.map((delivery: { id: string }) => delivery.id)).toEqual([ping.json.id]);

    const deleted = await admin('webhook', 'delete', ...scope, '--endpoint', id);
    expect(deleted.json).toEqual({ ok: true, id });
    const gone = await admin('webhook', 'show', ...scope, '--endpoint', id);
    expect(gone.code).toBe(2);
    expect(gone.stderr).toContain(`Webhook endpoint ${id} not found in app ${app.id} (test mode)`);
  });

  it('refuses bad webhook endpoints clearly', async () => {
    const { app } = await createCustomer(ctx.container);
    const create = (...more: string[]) =>
      admin('webhook', 'create', '--app', app.id, '--mode', 'live', '--events', 'buzz.created', ...more);
    const plainHttp = await create('--url', 'http://receiver.invalid/hooks');
    expect(plainHttp.code).toBe(2);
    expect(plainHttp.stderr).toMatch(/--url must be https:\/\//);
    const unknownEvent = await admin(
      'webhook',
      'create',
      '--app',
      app.id,
      '--mode',
      'test',
      '--url',
      'https://receiver.invalid/hooks',
      '--events',
      'buzz.created,buzz.deleted',
    );
    expect(unknownEvent.code).toBe(2);
    expect(unknownEvent.stderr).toMatch(/--events: unknown event type "buzz.deleted"; one of buzz.created/);
    const noApp = await admin('webhook', 'list', '--app', 'app_missing', '--mode', 'test');
    expect(noApp.code).toBe(2);
    expect(noApp.stderr).toMatch(/App app_missing not found/);
    expect(await ctx.container.webhooks.list({ appId: app.id, mode: 'live' }, { limit: 10 })).toMatchObject({
      items: [],
    });
  });

  it('keeps the local developer key across runs while it works', async () => {
    const stateFile = join(await mkdtemp(join(tmpdir(), 'dev-key-')), 'dev-key.json');
    const first = await admin('dev-key', '--state-file', stateFile);
    expect(first.json.key).toMatch(/^svc_test_/);
    expect(JSON.parse(await readFile(stateFile, 'utf8'))).toEqual(first.json);
    expect((await admin('dev-key', '--state-file', stateFile)).json).toEqual(first.json);
    const keyId = (await ctx.container.accounts.checkSecretKey(first.json.key)) as {
      principal: { keyId: string };
    };
    await ctx.container.accounts.revokeKey(keyId.principal.keyId);
    const replaced = await admin('dev-key', '--state-file', stateFile);
    expect(replaced.json.key).not.toBe(first.json.key);
  });
});
