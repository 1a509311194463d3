/**
 * `npm run backup` of the shared test stack, then `npm run restore` into an empty stack of this test's
 * own (SVC_STACK_DIR and a free SVC_STACK_PORT_BASE: its own PostgreSQL, Redis, MinIO and ejabberd,
 * started by the stack runner), and a control plane against it: the ledger, the objects and the chat
 * accounts are all there. The shared stack's servers are only read.
 */
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type ChatCredential, type ChatSession, connect, joinRoom } from '../../e2e/support/xmpp.js';
import { parseEnvFile } from '../../infra/src/env-file.js';
import { run } from '../../infra/src/exec.js';
import { REPO_ROOT, stackPaths } from '../../infra/src/paths.js';
import { assertPortsFree, PORTS, type PortName, portMap } from '../../infra/src/ports.js';
import { loadSettings } from '../src/config/load.js';
import type { Container } from '../src/container.js';
import { ledgerTotals } from './ledger.js';
import {
  callWithKey,
  createCustomer,
  ejabberdAsOperator,
  startTestApp,
  type TestContext,
} from './support.js';

const BOOTSTRAP = join(REPO_ROOT, 'infra', 'bootstrap.mjs');
const TARGET_SERVERS = 'postgres,redis,minio,ejabberd';

let source: TestContext;
let target: TestContext | undefined;
let scratch: string;
/** The empty stack's environment: its own state dir and port block, nothing of the shared stack's. */
let targetEnv: NodeJS.ProcessEnv;
let targetStarted = false;
const sessions: ChatSession[] = [];

/** The environment without any SVC_* setting, so that a command reads the profile it is told to. */
function commandEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('SVC_')));
  return { ...env, ...extra };
}

/** An npm script of the root package, as `npm run <args>` runs it. */
const npmScript = (args: string[], env: NodeJS.ProcessEnv) =>
  run(process.execPath, [BOOTSTRAP, ...args], { cwd: REPO_ROOT, env });

/** A block of ports below the dev and test stacks' (27000, 28000) where nothing listens. */
async function freePortBase(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + randomInt(0, 340) * 20;
    try {
      await assertPortsFree(Object.keys(PORTS) as PortName[], portMap(base));
      return base;
    } catch {
      // taken: try another block
    }
  }
  throw new Error('no free block of ports found below 27000');
}

beforeAll(async () => {
  source = await startTestApp();
  scratch = await mkdtemp(join(tmpdir(), 'svc-backup-test-'));
  // The servers' own users (postgres, ejabberd, redis) must reach their dirs inside it.
  await chmod(scratch, 0o755);
});

// Stopping ejabberd takes a few seconds of its own.
afterAll(async () => {
  await Promise.all(sessions.map((session) => session.stop()));
  await target?.close();
  if (targetStarted) await npmScript(['down', '--profile', 'test'], targetEnv);
  await source?.close();
  await rm(scratch, { recursive: true, force: true });
}, 60_000);

const Line = z.object({ line: z.string() });

/** Every ledger line of the account, every column, oldest first. */
const ledgerLines = (container: Container, accountId: string) =>
  container.pool.anyFirst(
    sql.type(Line)`select row_to_json(l)::text as line from ledger_entries l
      where account_id = ${accountId} order by created_at, id`,
  );

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('npm run backup, then npm run restore into an empty stack', () => {
  it('brings back the ledger, the objects and the chat accounts', { timeout: 300_000 }, async () => {
    // ----- data made through the services, on the shared test stack ------------------------------
    const customer = await createCustomer(source.container, { mode: 'live', balanceMicros: 5_000_000 });
    await source.container.billing.topUp({
      accountId: customer.account.id,
      amountMicros: 2_500_000,
      reference: 'second top-up',
    });
    const asApp = (method: 'GET' | 'POST' | 'PUT', url: string, payload?: object) =>
      callWithKey(source.app, customer.token, method, url, payload);

    const bytes = randomBytes(300 * 1024);
    const reserved = await asApp('POST', '/v1/storage/uploads', {
      name: 'report.pdf',
      content_type: 'application/pdf',
      size_bytes: bytes.length,
      metadata: { purpose: 'backup test' },
    });
    expect(reserved.statusCode, reserved.body).toBe(201);
    const upload = reserved.json();
    const put = await fetch(upload.upload_url, {
      method: 'PUT',
      headers: {
        'content-type': upload.upload_headers['Content-Type'],
        'if-none-match': upload.upload_headers['If-None-Match'],
      },
      body: bytes,
    });
    expect(put.status).toBe(200);
    const objectId = upload.object.id as string;
    expect((await asApp('POST', `/v1/storage/objects/${objectId}/complete`)).statusCode).toBe(200);
    // Priced reads (signed URLs), so that usage is charged to the ledger.
    for (let read = 0; read < 3; read++)
      expect((await asApp('GET', `/v1/storage/objects/${objectId}`)).statusCode).toBe(200);

    const minted = await asApp('POST', '/v1/realtime/chat/tokens', { user_id: 'ana', ttl_seconds: 3_600 });
    expect(minted.statusCode, minted.body).toBe(200);
    const credential = minted.json() as ChatCredential;
    const room = await asApp('POST', '/v1/realtime/chat/rooms', { room: 'lobby' });
    expect(room.statusCode, room.body).toBe(200);
    const roomJid = room.json().room as string;
    // An app user of its own, with a profile.
    const userToken = await asApp('POST', '/v1/users/ana/tokens', {});
    expect(userToken.statusCode, userToken.body).toBe(200);
    const anaToken = userToken.json().token as string;
    const username = `ana_${randomBytes(4).toString('hex')}`;
    const profile = await callWithKey(source.app, anaToken, 'PUT', '/v1/me/profile', { username });
    expect(profile.statusCode, profile.body).toBe(200);

    // Everything counted in Redis applied now (the chat user's record), and today's stored bytes
    // metered: nothing changes the account's ledger between the reads below and the dump.
    await source.container.accrual.flush();
    await source.container.storage.meterStoredBytes();
    const ledgerBefore = await ledgerLines(source.container, customer.account.id);
    const balanceBefore = (await asApp('GET', '/v1/realtime/balance')).json();
    // Two top-ups and the usage line of the priced calls.
    expect(ledgerBefore.map((line) => JSON.parse(line).kind).sort()).toEqual(['topup', 'topup', 'usage']);

    // ----- npm run backup -------------------------------------------------------------------------
    const backupDir = join(scratch, 'backup');
    const backup = await npmScript(['backup', '--profile', 'test', '--to', backupDir], commandEnv());
    expect(backup.code, backup.stderr).toBe(0);
    expect(backup.stdout).toMatch(
      /^database .*\nobjects .*\nejabberd .*\nchat .*\nbackup of the test stack written to /m,
    );
    const manifest = JSON.parse(await readFile(join(backupDir, 'manifest.json'), 'utf8'));
    expect(manifest.database.rows.ledger_entries).toBeGreaterThanOrEqual(ledgerBefore.length);
    expect(manifest.objects.count).toBeGreaterThanOrEqual(1);
    // The premise: the account did not change while the backup ran.
    expect(await ledgerLines(source.container, customer.account.id)).toEqual(ledgerBefore);

    // ----- an empty stack of its own, with the shared stack's secrets (as on a new machine) --------
    const stackDir = join(scratch, 'stack');
    await mkdir(join(stackDir, 'test'), { recursive: true });
    await copyFile(stackPaths('test').secretsFile, join(stackDir, 'test', 'secrets.json'));
    targetEnv = commandEnv({ SVC_STACK_DIR: stackDir, SVC_STACK_PORT_BASE: String(await freePortBase()) });
    targetStarted = true;
    const up = await npmScript(['up', '--profile', 'test', '--only', TARGET_SERVERS], targetEnv);
    expect(up.code, `${up.stdout}${up.stderr}`).toBe(0);

    // ----- npm run restore ------------------------------------------------------------------------
    const restore = await npmScript(['restore', '--profile', 'test', '--from', backupDir], targetEnv);
    expect(restore.code, `${restore.stdout}${restore.stderr}`).toBe(0);
    expect(restore.stdout).toMatch(
      /^backup .* verified .*\ndatabase +replaced: .*\nobjects .*\nejabberd .*\nchat .*\nrestored into the test stack /m,
    );
    // A second restore would replace the accounts now there: refused, with a usage error's exit code.
    const again = await npmScript(['restore', '--profile', 'test', '--from', backupDir], targetEnv);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`holds ${manifest.database.rows.accounts} accounts`);
    expect(again.stderr).toContain('--force');

    // ----- a control plane on the restored stack --------------------------------------------------
    const restoredSettings = {
      ...loadSettings(parseEnvFile(await readFile(join(stackDir, 'test', 'control-plane.env'), 'utf8'))),
      // Served at the same public URL, as a stack restored on a new machine is: user tokens name it
      // as their issuer.
      SVC_PUBLIC_URL: source.container.settings.SVC_PUBLIC_URL,
    };
    target = await startTestApp({ settings: restoredSettings });
    // The restored ejabberd asks this listener about logins.
    await target.internal.listen({ host: '127.0.0.1', port: restoredSettings.SVC_INTERNAL_PORT });
    const asRestoredApp = (method: 'GET' | 'POST', url: string) =>
      callWithKey(target!.app, customer.token, method, url);

    // The ledger: every line, the balance, and balance = Σ ledger.
    expect(await ledgerLines(target.container, customer.account.id)).toEqual(ledgerBefore);
    const totals = await ledgerTotals(target.container, customer.account.id);
    expect(totals.balance).toBe(totals.ledger);
    expect(totals).toEqual(await ledgerTotals(source.container, customer.account.id));
    const balance = await asRestoredApp('GET', '/v1/realtime/balance');
    expect(balance.statusCode).toBe(200);
    expect(balance.json()).toEqual(balanceBefore);

    // The object: its bytes, through a download URL the restored API signs for the restored MinIO.
    const read = await asRestoredApp('GET', `/v1/storage/objects/${objectId}`);
    expect(read.statusCode, read.body).toBe(200);
    expect(new URL(read.json().url).port).toBe(String(new URL(restoredSettings.SVC_S3_ENDPOINT).port));
    const download = await fetch(read.json().url);
    expect(download.status).toBe(200);
    expect(sha256(new Uint8Array(await download.arrayBuffer()))).toBe(sha256(bytes));

    // The app user: the token the app minted before the backup still opens the user's profile.
    const restoredProfile = await callWithKey(target.app, anaToken, 'GET', '/v1/me/profile');
    expect(restoredProfile.statusCode, restoredProfile.body).toBe(200);
    expect(restoredProfile.json().username).toBe(username);

    // The chat account: known to ejabberd's isuser, its credential accepted by the restored ejabberd
    // (asked of this control plane), and its room there to join.
    const isuser = await target.internal.inject({
      method: 'POST',
      url: '/internal/ejabberd/auth',
      headers: { authorization: `Bearer ${restoredSettings.SVC_EJABBERD_AUTH_SECRET}` },
      payload: { op: 'isuser', user: credential.user, server: credential.domain },
    });
    expect(isuser.json()).toEqual({ ok: true });
    const ana = await connect({ ...credential, ws: restoredSettings.SVC_CHAT_WS_URL });
    sessions.push(ana);
    const joined = await joinRoom(ana, roomJid);
    expect(joined.getChild('x', 'http://jabber.org/protocol/muc#user')).toBeDefined();
    const options = await ejabberdAsOperator(restoredSettings, 'get_room_options', {
      name: roomJid.split('@')[0],
      service: restoredSettings.SVC_CHAT_MUC_DOMAIN,
    });
    expect(options.status).toBe(200);
  });
});
