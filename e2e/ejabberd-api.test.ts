/**
 * ejabberd's HTTP API trusts no process for being local: every command but the health check needs an
 * API account's credential, the control plane's account runs only the commands it uses, and no API
 * account is a chat user. Asked of the running test stack's ejabberd.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EJABBERD_API_USER } from '../control-plane/src/adapters/ejabberd.js';
import { ejabberdAsOperator, stackSettings } from './support/stack.js';
import { loginFailure } from './support/xmpp.js';

const settings = stackSettings();

function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}@${settings.SVC_CHAT_DOMAIN}:${password}`).toString('base64')}`;
}

async function command(name: string, body: object, authorization?: string): Promise<number> {
  const response = await fetch(`${settings.SVC_EJABBERD_API_URL}/${name}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
    body: JSON.stringify(body),
  });
  await response.body?.cancel();
  return response.status;
}

const controlPlane = basic(EJABBERD_API_USER, settings.SVC_EJABBERD_API_SECRET);
const revocation = { user: `nobody-${randomUUID().slice(0, 8)}`, host: settings.SVC_CHAT_DOMAIN };
const register = () => ({
  user: `intruder-${randomUUID().slice(0, 8)}`,
  host: settings.SVC_CHAT_DOMAIN,
  password: randomUUID(),
});

describe("ejabberd's HTTP API", () => {
  it('refuses a local caller without a credential, or with a wrong one, everything but the health check', async () => {
    expect(await command('svc_revoke_user', revocation)).toBeGreaterThanOrEqual(400);
    expect(await command('register', register())).toBeGreaterThanOrEqual(400);
    expect(await command('svc_revoke_user', revocation, basic(EJABBERD_API_USER, 'not-the-secret'))).toBe(
      401,
    );
    expect(await command('status', {})).toBe(200);
  });

  it("runs the control plane's commands with its credential, and no other command", async () => {
    expect(await command('svc_revoke_user', revocation, controlPlane)).toBe(200);
    expect(await command('status', {}, controlPlane)).toBe(200);
    expect(await command('register', register(), controlPlane)).toBe(403);
    expect(await command('get_room_options', { name: 'x', service: 'y' }, controlPlane)).toBe(403);
  });

  it("runs any command but stop and start as the operator's account", async () => {
    const response = await ejabberdAsOperator(settings, 'connected_users_number', {});
    expect(response.status, await response.text()).toBe(200);
  });

  it('has no chat user among its accounts: an XMPP client cannot log in as one', async () => {
    const failure = await loginFailure({
      jid: `${EJABBERD_API_USER}@${settings.SVC_CHAT_DOMAIN}`,
      user: EJABBERD_API_USER,
      domain: settings.SVC_CHAT_DOMAIN,
      password: settings.SVC_EJABBERD_API_SECRET,
      ws: settings.SVC_CHAT_WS_URL,
    } as Parameters<typeof loginFailure>[0]);
    expect(failure).not.toBeNull();
  });
});
