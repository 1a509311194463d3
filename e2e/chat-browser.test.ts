/** A web page logs in to ejabberd with a minted credential and talks with a Node client. */
import { createRequire } from 'node:module';
import { xml } from '@xmpp/client';
import { describe, expect, it } from 'vitest';
import { useWebApp } from './support/browser.js';
import { api, createCustomer } from './support/stack.js';
import { bodyOf, type ChatCredential, connect } from './support/xmpp.js';

/** xmpp.js's browser build (UMD, exposes window.XMPP), served by the page's own origin. */
const XMPP_BROWSER_BUILD = createRequire(import.meta.url).resolve('@xmpp/client/dist/xmpp.min.js');

const PAGE = `<!doctype html><meta charset="utf-8"><title>chat</title>
<script src="/xmpp.min.js"></script>
<script>
  // Logs in, reports every chat message it receives, and can send one.
  window.received = [];
  window.login = async (credential) => {
    const { client, xml } = window.XMPP;
    const xmpp = client({ service: credential.ws, domain: credential.domain, resource: 'web',
                          username: credential.user, password: credential.password });
    xmpp.on('error', () => {});
    xmpp.on('stanza', (stanza) => {
      if (stanza.is('message') && stanza.getChildText('body')) window.received.push(stanza.getChildText('body'));
    });
    await xmpp.start();
    await xmpp.send(xml('presence'));
    window.say = (to, text) => xmpp.send(xml('message', { to, type: 'chat' }, xml('body', {}, text)));
    return true;
  };
</script>`;

const web = useWebApp({
  '/': { type: 'text/html', body: PAGE },
  '/xmpp.min.js': { type: 'text/javascript', file: XMPP_BROWSER_BUILD },
});

describe('a browser client', () => {
  it('logs in over WebSocket with a minted credential and exchanges messages with a Node client', async () => {
    const customer = await createCustomer(web.container);
    const mint = async (userId: string) =>
      (await api<ChatCredential>(customer, 'POST', '/v1/realtime/chat/tokens', { user_id: userId })).body;
    const webUser = await mint('web-user');
    const nodeUser = await connect(await mint('node-user'));
    try {
      const page = await web.browser.newPage();
      await page.goto(web.url);
      expect(
        await page.evaluate(
          (credential) => (window as unknown as { login(c: unknown): Promise<boolean> }).login(credential),
          webUser,
        ),
      ).toBe(true);

      const fromPage = nodeUser.next((s) => s.is('message') && bodyOf(s) === 'hello from the browser');
      await page.evaluate(
        (to) =>
          (window as unknown as { say(t: string, m: string): Promise<void> }).say(
            to,
            'hello from the browser',
          ),
        nodeUser.credential.jid,
      );
      expect((await fromPage).attrs.from).toMatch(new RegExp(`^${webUser.jid}/`));

      await nodeUser.xmpp.send(
        xml('message', { to: webUser.jid, type: 'chat' }, xml('body', {}, 'hello from node')),
      );
      await page.waitForFunction(() =>
        (window as unknown as { received: string[] }).received.includes('hello from node'),
      );
    } finally {
      await nodeUser.stop();
    }
  });
});
