import type { Element } from '@xmpp/xml';
import { expect, it } from 'vitest';
import { connect, isOtp } from '../../../e2e/support/xmpp.js';
import { chatTestFile } from '../app-users.js';
import { callWithKey, createCustomer } from '../support.js';
import { stackServer } from './stack-servers.js';

// Runs after every other test file (its project's group order is last): it stops the test stack's
// ejabberd and starts it again, which every other chat test would feel.

const STOPPING_AND_STARTING_MS = 120_000;

const file = chatTestFile();

const codeIn = (stanza: Element) => /\b(\d{6})\b/.exec(stanza.getChildText('body') ?? '')![1]!;

it(
  'keeps a stored code and delivers the next send after ejabberd is stopped and started again',
  async () => {
    const made = await createCustomer(file.ctx.container);
    const call = (url: string, payload: object) =>
      callWithKey(file.ctx.app, made.token, 'POST', url, payload);
    const credential = async (userId: string) => {
      const minted = await call('/v1/realtime/chat/tokens', { user_id: userId });
      expect(minted.statusCode, minted.body).toBe(200);
      return minted.json();
    };
    const offline = await credential('offline-across-restart');
    const online = await credential('online-after-restart');
    const stored = await call('/v1/otp/send', { to: 'offline-across-restart' });
    expect(stored.json()).toMatchObject({ delivered: true });

    await stackServer('down', 'ejabberd');
    await stackServer('up', 'ejabberd');

    // The offline store outlives the restart.
    const first = await connect(offline);
    file.sessions.push(first);
    expect((await first.next(isOtp)).getChild('svc', 'urn:svc:messaging:0')!.attrs.id).toBe(stored.json().id);
    // The component reconnects on its own; a send made while it does waits for it.
    const second = await connect(online);
    file.sessions.push(second);
    const arriving = second.next(isOtp);
    const sent = await call('/v1/otp/send', { to: 'online-after-restart' });
    expect(sent.statusCode, sent.body).toBe(200);
    expect(sent.json()).toMatchObject({ delivered: true });
    const code = codeIn(await arriving);
    const verified = await call('/v1/otp/verify', { to: 'online-after-restart', code });
    expect(verified.json()).toEqual({ verified: true });
  },
  STOPPING_AND_STARTING_MS,
);
