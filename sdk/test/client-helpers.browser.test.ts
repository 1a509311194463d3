/**
 * The client helpers in Chromium, against the running stack: a page connects chat and live with
 * credentials from its app's server (this test, through an exposed function that mints them with the
 * server client), and both come back with fresh ones when their connections drop after the
 * credentials expired.
 */
import { xml } from '@xmpp/client';
import type { Page, WebSocketRoute } from 'playwright';
import { describe, expect, it } from 'vitest';
import { useWebApp } from '../../e2e/support/browser.js';
import { roomService } from '../../e2e/support/livekit.js';
import { createCustomer, ejabberdAsOperator, stackSettings } from '../../e2e/support/stack.js';
import { connect } from '../../e2e/support/xmpp.js';
import { createServerClient } from '../src/index.js';
import { browserBundle } from './support/bundle.js';

const bundle = await browserBundle({
  contents: `import { connectChat } from './src/chat.ts';
import { joinLive } from './src/live.ts';
window.svc = { connectChat, joinLive };`,
  resolveDir: new URL('..', import.meta.url).pathname,
});

const PAGE = `<!doctype html><meta charset="utf-8"><title>app</title>
<script type="module">
  import '/sdk.js';
  const { connectChat, joinLive } = window.svc;
  window.received = [];
  window.start = async (user, room) => {
    // The app's server mints each credential: here, the test's exposed appServer function.
    window.chat = await connectChat({ credential: () => window.appServer('chat', user), resource: 'web' });
    // Times the session became available: the server echoed its initial presence.
    window.available = 1;
    window.chat.xmpp.on('stanza', (stanza) => {
      if (stanza.is('presence') && !stanza.attrs.type && stanza.attrs.from === window.chat.xmpp.jid.toString())
        window.available++;
    });
    window.chat.xmpp.on('stanza', (stanza) => {
      const body = stanza.is('message') && stanza.getChildText('body');
      if (body) window.received.push(body);
    });
    window.chatEnded = undefined;
    window.chat.ended.then((error) => (window.chatEnded = error ? error.message : 'stopped'));
    // LiveKit's own reconnection gives up quickly here, so that the rejoin with a fresh token is seen.
    window.live = await joinLive({
      token: () => window.appServer('live', user, room),
      room: { reconnectPolicy: { nextRetryDelayInMs: (context) => (context.retryCount < 2 ? 100 : null) } },
    });
    window.liveEnded = undefined;
    window.live.ended.then((end) => (window.liveEnded = end.reason ?? String(end.error)));
    return {
      jid: window.chat.xmpp.jid.bare().toString(),
      room: window.live.token.room,
      identity: window.live.room.localParticipant.identity,
    };
  };
  window.liveState = () => window.live.room.state;
  window.ends = () => [window.chatEnded ?? null, window.liveEnded ?? null];
</script>`;

const web = useWebApp({
  '/': { type: 'text/html', body: PAGE },
  '/sdk.js': { type: 'text/javascript', body: bundle },
});

interface PageWindow {
  start(user: string, room: string): Promise<{ jid: string; room: string; identity: string }>;
  liveState(): string;
  ends(): [string | null, string | number | null];
  received: string[];
  available: number;
  chat: { stop(): Promise<void> };
  live: { leave(): Promise<void>; room: { simulateScenario(scenario: string): Promise<void> } };
}
/**
 * The app's page, started for `user` in the room `stage`, with credentials of the shortest ttl the
 * API takes (so that a test can outlive them) from its server: an exposed function that mints them
 * with the server client and counts them.
 */
async function openApp(user: string) {
  const customer = await createCustomer(web.container);
  const svc = createServerClient({ baseUrl: stackSettings().SVC_PUBLIC_URL, secretKey: customer.token });
  const minted = { chat: 0, live: 0 };
  const page = await web.browser.newPage();
  await page.exposeFunction('appServer', async (kind: 'chat' | 'live', user: string, room?: string) => {
    minted[kind]++;
    if (kind === 'chat')
      return (await svc.chat.tokens.create({ body: { user_id: user, ttl_seconds: 60 } })).data;
    return (
      await svc.live.tokens.create({ body: { room: room!, identity: user, publish: true, ttl_seconds: 60 } })
    ).data;
  });
  const mintedAt = Date.now();
  const signalling = await networkToLiveKit(page);
  await page.goto(web.url);
  await page.waitForFunction(() => 'svc' in window);
  const started = await page.evaluate(([user, room]) => (window as unknown as PageWindow).start(user, room), [
    user,
    'stage',
  ] as const);
  return { svc, page, minted, started, signalling, mintedAt };
}

/** Runs `run` in the page with its window (its source is sent, so it may use nothing else). */
const inPage = <T>(page: Page, run: (window: PageWindow) => T | Promise<T>) =>
  page.evaluate(`(${run})(window)`) as Promise<T>;

describe('the client helpers in a browser', () => {
  it('connect chat and live, and reconnect with fresh credentials once theirs expired', {
    timeout: 200_000,
  }, async () => {
    const { svc, page, minted, started, signalling, mintedAt } = await openApp('web-user');
    expect(started.jid).toMatch(/\.web-user@/);
    expect(minted).toEqual({ chat: 1, live: 1 });

    const friend = await connect((await svc.chat.tokens.create({ body: { user_id: 'friend' } })).data);
    try {
      const hearsFromFriend = async (text: string) => {
        await friend.xmpp.send(messageTo(started.jid, text));
        await page.waitForFunction(
          (expected) => (window as unknown as PageWindow).received.includes(expected),
          text,
        );
      };
      await hearsFromFriend('before expiry');
      expect(await identitiesIn(started.room)).toContain(started.identity);

      // Past the chat credential's expiry the session drops (ejabberd kicks it): it logs in again
      // with a fresh credential.
      await sleepUntil(mintedAt + 62_000);
      const [user, host] = started.jid.split('@') as [string, string];
      expect((await ejabberdAsOperator(stackSettings(), 'kick_user', { user, host })).status).toBe(200);
      // Once available again: a message that meets the session logged in but not yet available
      // may be stored by ejabberd for a later login (its offline storage races the presence).
      await page.waitForFunction(() => (window as unknown as PageWindow).available === 2);
      await hearsFromFriend('after expiry');
      expect(minted.chat).toBe(2);

      // The page's network to LiveKit goes down, past its token's expiry. LiveKit cannot resume and
      // gives up; the room rejoins with a fresh token once the network is back (asked once, kept
      // across the attempts).
      await signalling.cut();
      await expect
        .poll(() => inPage(page, (window) => window.liveState()), { timeout: 30_000 })
        .toBe('disconnected');
      await signalling.restore();
      await expect
        .poll(() => inPage(page, (window) => window.liveState()), { timeout: 40_000 })
        .toBe('connected');
      expect(minted.live).toBe(2);
      expect(await identitiesIn(started.room)).toContain(started.identity);
      expect(await inPage(page, (window) => window.ends())).toEqual([null, null]);

      await inPage(page, async (window) => {
        await window.chat.stop();
        await window.live.leave();
      });
      await expect
        .poll(() => inPage(page, (window) => window.ends()))
        .toEqual([
          'stopped',
          1, // DisconnectReason.CLIENT_INITIATED
        ]);
    } finally {
      await friend.stop();
    }
  });

  it('ends the live session without rejoining when the participant is removed', async () => {
    const { page, minted, started } = await openApp('removed-user');
    await roomService().removeParticipant(started.room, started.identity);
    // LiveKit tells the page within a second when the machine is quiet, and took longer beside the
    // other test files: the poll's default second is not what this test is about.
    await expect.poll(() => inPage(page, (window) => window.ends()), { timeout: 15_000 }).toEqual([null, 4]); // PARTICIPANT_REMOVED
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // past the first rejoin's delay
    expect(minted.live).toBe(1);
    expect(await inPage(page, (window) => window.liveState())).toBe('disconnected');
    await inPage(page, (window) => window.chat.stop());
  });
});

/**
 * The page's WebSocket connections to LiveKit's signalling, passed through until `cut()`: that closes
 * them as a network loss would, and refuses new ones until `restore()`.
 */
async function networkToLiveKit(page: Page) {
  const open: WebSocketRoute[] = [];
  await page.routeWebSocket(/\/rtc\b/, (socket) => {
    socket.connectToServer();
    open.push(socket);
  });
  return {
    cut: async () => {
      await page.context().setOffline(true);
      await Promise.all(open.splice(0).map((socket) => socket.close()));
    },
    restore: () => page.context().setOffline(false),
  };
}

const sleepUntil = (time: number) => new Promise((resolve) => setTimeout(resolve, time - Date.now()));

async function identitiesIn(room: string) {
  return (await roomService().listParticipants(room)).map((participant) => participant.identity);
}

const messageTo = (to: string, text: string) => xml('message', { to, type: 'chat' }, xml('body', {}, text));
