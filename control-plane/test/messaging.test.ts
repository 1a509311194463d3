import { xml } from '@xmpp/client';
import type { Element } from '@xmpp/xml';
import { type Interceptor, sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type ChatSession, connect } from '../../e2e/support/xmpp.js';
import { callWithKey, createCustomer, startTestApp, type TestContext } from './support.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

let ctx: TestContext;
let receiver: Receiver;
const sessions: ChatSession[] = [];

/**
 * The send times of consent replies this replica noted for `watched.userId`; the first waits
 * `watched.delay` ms first, as one held up by a busy database.
 */
let watched: { userId: string; delay: number; seen: number[] } | null = null;
const consentReplies: Interceptor = {
  name: 'watch-consent-replies',
  beforeQueryExecution: async (_context, query) => {
    const watching = watched;
    if (
      watching &&
      /insert into promo_consent_replies/.test(query.sql) &&
      query.values.includes(watching.userId)
    ) {
      watching.seen.push(Number(query.values.at(-1)));
      if (watching.seen.length === 1) await new Promise((resolve) => setTimeout(resolve, watching.delay));
    }
    return null;
  },
};

beforeAll(async () => {
  ctx = await startTestApp({ interceptors: [consentReplies] });
  receiver = await startReceiver();
});
afterAll(async () => {
  await Promise.all(sessions.map((session) => session.stop()));
  await receiver.close();
  await ctx.close();
});

const NS = 'urn:svc:messaging:0';
const MINUTE = 60_000;

async function customer(options: { mode?: 'test' | 'live'; balanceMicros?: number } = {}) {
  const made = await createCustomer(ctx.container, options);
  const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: object) =>
    callWithKey(ctx.app, made.token, method, url, payload);
  /** A user with a chat account (a minted credential), not connected. */
  const user = async (userId: string) => {
    const minted = await call('POST', '/v1/realtime/chat/tokens', { user_id: userId });
    expect(minted.statusCode, minted.body).toBe(200);
    return minted.json();
  };
  /** A user signed in to the chat server with a real client. */
  const online = async (userId: string) => {
    const session = await connect(await user(userId));
    sessions.push(session);
    return session;
  };
  return { ...made, call, user, online };
}

const marked = (purpose: string) => (stanza: Element) =>
  stanza.is('message') && stanza.getChild('svc', NS)?.attrs.purpose === purpose;
/** Settles 'nothing' unless a message of the purpose arrives within 1.5 s. */
const arrivals = (session: ChatSession, purpose: string) =>
  session.next(marked(purpose), 1_500).then(
    () => 'arrived',
    () => 'nothing',
  );
const codeIn = (stanza: Element) => /\b(\d{6})\b/.exec(stanza.getChildText('body') ?? '')![1]!;

describe('POST /v1/otp/send and /v1/otp/verify', () => {
  it('delivers a code to an online user at once; the code verifies once, and its cost is in the body', async () => {
    const app = await customer();
    const ana = await app.online('ana');
    const arriving = ana.next(marked('otp'));
    const sent = await app.call('POST', '/v1/otp/send', { to: 'ana', template: 'Code for {app}: {code}' });
    expect(sent.statusCode, sent.body).toBe(200);
    const result = sent.json();
    expect(result).toMatchObject({ status: 'sent', channel: 'in_app', delivered: true });
    expect(result.cost_usd).toBe(Number(sent.headers['x-svc-cost-usd']));
    expect(result.cost_usd).toBe(0.005);
    const message = await arriving;
    const code = codeIn(message);
    expect(sent.body).not.toContain(code);
    expect(message.getChildText('body')).toBe(`Code for test app: ${code}`);
    const marker = message.getChild('svc', NS)!;
    expect(marker.attrs.id).toBe(result.id);
    expect(new Date(marker.attrs.expires!).getTime() - ctx.clock.now().getTime()).toBe(5 * MINUTE);
    // The code is in the body only; OTPs are never archived.
    expect(JSON.stringify(marker.attrs)).not.toContain(code);
    expect(message.getChild('no-permanent-store', 'urn:xmpp:hints')).toBeDefined();
    const verify = (tried: string) => app.call('POST', '/v1/otp/verify', { to: 'ana', code: tried });
    const wrong = code === '000000' ? '000001' : '000000';
    expect((await verify(wrong)).json()).toEqual({ verified: false });
    expect((await verify(code)).json()).toEqual({ verified: true });
    expect((await verify(code)).json()).toEqual({ verified: false });
  });

  it('keeps the code for an offline user, who gets it at the next login', async () => {
    const app = await customer();
    const credential = await app.user('bob');
    const sent = (await app.call('POST', '/v1/otp/send', { to: 'bob' })).json();
    expect(sent).toMatchObject({ delivered: true });
    const bob = await connect(credential);
    sessions.push(bob);
    const message = await bob.next(marked('otp'));
    expect(message.getChild('svc', NS)!.attrs.id).toBe(sent.id);
    expect((await app.call('POST', '/v1/otp/verify', { to: 'bob', code: codeIn(message) })).json()).toEqual({
      verified: true,
    });
  });

  it('hands a code at once to a session signed in that has not sent its presence yet', async () => {
    const app = await customer();
    // The app asks for the code the instant the login ends: stored offline then, it could miss the
    // delivery the session's initial presence makes, and wait for the next login.
    const eve = await connect(await app.user('eve'), 'e2e', { signingIn: true });
    sessions.push(eve);
    const arriving = eve.next(marked('otp'), 5_000);
    const sent = (await app.call('POST', '/v1/otp/send', { to: 'eve' })).json();
    expect(sent).toMatchObject({ delivered: true });
    const message = await arriving;
    expect(message.getChild('svc', NS)!.attrs.id).toBe(sent.id);
    const arrivedAt = await ctx.container.pool.oneFirst(
      sql.type(
        z.object({ arrived_at: z.date().nullable() }),
      )`select arrived_at from messages where id = ${sent.id}`,
    );
    expect(arrivedAt).not.toBeNull();
  });

  it('keeps a code offline for a session that went unavailable, until it is available again', async () => {
    const app = await customer();
    const fay = await app.online('fay');
    await fay.xmpp.send(xml('presence', { type: 'unavailable' }));
    // Answered after the presence before it: the server has taken the session as unavailable.
    await fay.xmpp.iqCaller.request(xml('iq', { type: 'get' }, xml('ping', { xmlns: 'urn:xmpp:ping' })));
    const waiting = arrivals(fay, 'otp');
    const sent = (await app.call('POST', '/v1/otp/send', { to: 'fay' })).json();
    expect(sent).toMatchObject({ delivered: true });
    expect(await waiting).toBe('nothing');
    const arriving = fay.next(marked('otp'));
    await fay.xmpp.send(xml('presence'));
    expect((await arriving).getChild('svc', NS)!.attrs.id).toBe(sent.id);
  });

  it('hands a code a lost connection never acknowledged to the next login on that device', async () => {
    const app = await customer();
    const credential = await app.user('hal');
    const phone = await connect(credential, 'phone');
    sessions.push(phone);
    // The connection is lost (the app killed, the network gone), without a closing stream: the server
    // keeps the session for its resumption (XEP-0198) and queues what is sent to it, unacknowledged.
    const { socket } = phone.xmpp.socket as unknown as { socket: { terminate(): void } };
    socket.terminate();
    const sent = (await app.call('POST', '/v1/otp/send', { to: 'hal' })).json();
    expect(sent).toMatchObject({ delivered: true });
    // Back on the same device without resuming: the new session replaces the kept one, whose
    // unacknowledged code comes to it rather than bouncing back to the sender. It comes even before
    // the new session's initial presence: offline storage, emptied by that presence, could take it
    // just after (the old session ends while the new one signs in) and keep it until a later login.
    const again = await connect(credential, 'phone', { signingIn: true });
    sessions.push(again);
    const message = await again.next(marked('otp'));
    expect(message.getChild('svc', NS)!.attrs.id).toBe(sent.id);
    expect((await app.call('POST', '/v1/otp/verify', { to: 'hal', code: codeIn(message) })).json()).toEqual({
      verified: true,
    });
  });

  it('emits otp.delivered when the code reaches the client, never with the code', async () => {
    const app = await customer();
    const created = await app.call('POST', '/v1/webhooks', {
      url: receiver.url,
      event_types: ['otp.delivered'],
    });
    expect(created.statusCode, created.body).toBe(201);
    const cleo = await app.online('cleo');
    const arriving = cleo.next(marked('otp'));
    const sent = (await app.call('POST', '/v1/otp/send', { to: 'cleo' })).json();
    const code = codeIn(await arriving);
    const event = await eventFor(sent.id);
    expect(event.type).toBe('otp.delivered');
    expect(event.data).toMatchObject({ id: sent.id, to: 'cleo', user_id: 'cleo' });
    expect(JSON.stringify(event)).not.toContain(code);
  });

  it('emits otp.delivered for a stored code only when a login reads it', async () => {
    const app = await customer();
    await app.call('POST', '/v1/webhooks', { url: receiver.url, event_types: ['otp.delivered'] });
    const credential = await app.user('dora');
    const sent = (await app.call('POST', '/v1/otp/send', { to: 'dora' })).json();
    expect(sent).toMatchObject({ delivered: true });
    const arrivedAt = () =>
      ctx.container.pool.oneFirst(
        sql.type(
          z.object({ arrived_at: z.date().nullable() }),
        )`select arrived_at from messages where id = ${sent.id}`,
      );
    expect(await arrivedAt()).toBeNull();
    const dora = await connect(credential);
    sessions.push(dora);
    await dora.next(marked('otp'));
    const event = await eventFor(sent.id);
    expect(event.data).toMatchObject({ id: sent.id, user_id: 'dora' });
    // Noted by whichever connected control plane ejabberd told (the stack's runs on its own clock).
    expect((await arrivedAt())?.toISOString()).toBe(event.data.delivered_at);
  });

  it('ends a code after five wrong answers, and at the end of its five minutes', async () => {
    const app = await customer();
    const dan = await app.online('dan');
    const verify = (code: string) => app.call('POST', '/v1/otp/verify', { to: 'dan', code });
    let arriving = dan.next(marked('otp'));
    await app.call('POST', '/v1/otp/send', { to: 'dan' });
    let code = codeIn(await arriving);
    const wrong = code === '000000' ? '000001' : '000000';
    for (let attempt = 1; attempt <= 5; attempt += 1)
      expect((await verify(wrong)).json().verified).toBe(false);
    expect((await verify(code)).json().verified).toBe(false);

    arriving = dan.next(marked('otp'));
    await app.call('POST', '/v1/otp/send', { to: 'dan' });
    code = codeIn(await arriving);
    for (let attempt = 1; attempt <= 4; attempt += 1)
      expect((await verify(wrong)).json().verified).toBe(false);
    ctx.clock.advance(5 * MINUTE - 1);
    expect((await verify(code)).json().verified).toBe(true);

    arriving = dan.next(marked('otp'));
    await app.call('POST', '/v1/otp/send', { to: 'dan' });
    code = codeIn(await arriving);
    ctx.clock.advance(5 * MINUTE);
    expect((await verify(code)).json().verified).toBe(false);
    ctx.clock.set(new Date());
  });

  it('replaces an earlier code with a newer one', async () => {
    const app = await customer();
    const eve = await app.online('eve');
    let arriving = eve.next(marked('otp'));
    await app.call('POST', '/v1/otp/send', { to: 'eve' });
    const first = codeIn(await arriving);
    arriving = eve.next(marked('otp'));
    await app.call('POST', '/v1/otp/send', { to: 'eve' });
    const second = codeIn(await arriving);
    if (first !== second)
      expect((await app.call('POST', '/v1/otp/verify', { to: 'eve', code: first })).json().verified).toBe(
        false,
      );
    expect((await app.call('POST', '/v1/otp/verify', { to: 'eve', code: second })).json().verified).toBe(
      true,
    );
  });

  it('allows 3 sends to a recipient in 10 minutes and 15 in a day, counted per user by id or phone', async () => {
    const start = new Date('2027-01-05T10:00:00Z');
    ctx.clock.set(start);
    const app = await customer();
    await app.user('fay');
    expect((await app.call('PUT', '/v1/users/fay/phone', { phone: '+447700900123' })).statusCode).toBe(200);
    const send = (to: string) => app.call('POST', '/v1/otp/send', { to });
    let sent = 0;
    for (let round = 0; round < 5; round += 1) {
      for (const to of ['fay', '+447700900123', 'fay']) {
        const response = await send(to);
        expect(response.statusCode, `send ${sent + 1}: ${response.body}`).toBe(200);
        sent += 1;
      }
      const over = await send('fay');
      expect(over.statusCode).toBe(429);
      // Room again when the round's first send is 10 minutes old; after the 15th, when the day's first is a day old.
      expect(Number(over.headers['retry-after'])).toBe(round < 4 ? 600 : 86_400 - 40 * 60);
      ctx.clock.advance(10 * MINUTE);
    }
    expect(sent).toBe(15);
    const sixteenth = await send('+447700900123');
    expect(sixteenth.statusCode).toBe(429);
    expect(Number(sixteenth.headers['retry-after'])).toBe(86_400 - 50 * 60);
    // Another app's sends to its own user of the same id are its own to count.
    const other = await customer();
    await other.user('fay');
    expect((await other.call('POST', '/v1/otp/send', { to: 'fay' })).statusCode).toBe(200);
    ctx.clock.set(new Date());
  });

  it('records a send to someone it cannot reach as not delivered, with the reason', async () => {
    const app = await customer();
    expect((await app.call('POST', '/v1/otp/send', { to: '+15550100999' })).json()).toMatchObject({
      delivered: false,
      reason: 'unknown_phone',
    });
    expect((await app.call('POST', '/v1/otp/send', { to: 'never-chatted' })).json()).toMatchObject({
      delivered: false,
      reason: 'no_chat_account',
    });
    for (const to of ['+0441234', '+1 555 0100', '+1234567890123456']) {
      const response = await app.call('POST', '/v1/otp/send', { to });
      expect(response.statusCode, to).toBe(422);
      expect(response.json().error.fields[0].field).toBe('to');
    }
    const noCode = await app.call('POST', '/v1/otp/send', { to: 'x', template: 'Hello from {app}' });
    expect(noCode.statusCode).toBe(422);
    expect(noCode.json().error.fields[0].field).toBe('template');
    expect((await app.call('POST', '/v1/otp/verify', { to: 'x', code: '12345' })).statusCode).toBe(422);
  });

  it('honours a block the user made in their own client (XEP-0191): nothing arrives and the send says why', async () => {
    const app = await customer();
    const gus = await app.online('gus');
    const prefix = gus.credential.user.split('.')[0];
    await gus.xmpp.iqCaller.request(
      xml(
        'iq',
        { type: 'set' },
        xml('block', { xmlns: 'urn:xmpp:blocking' }, xml('item', { jid: `${prefix}.app@notify.chat.local` })),
      ),
    );
    const arriving = arrivals(gus, 'otp');
    expect((await app.call('POST', '/v1/otp/send', { to: 'gus' })).json()).toMatchObject({
      delivered: false,
      reason: 'blocked',
    });
    expect(await arriving).toBe('nothing');
  });
});

describe('POST /v1/promo/send', () => {
  it('delivers from the app, stops at STOP, and sends the reply on as message.received', async () => {
    ctx.clock.set(new Date());
    const app = await customer();
    const created = await app.call('POST', '/v1/webhooks', {
      url: receiver.url,
      event_types: ['message.received'],
    });
    expect(created.statusCode, created.body).toBe(201);
    const hal = await app.online('hal');
    const arriving = hal.next(marked('promo'));
    const sent = await app.call('POST', '/v1/promo/send', { to: 'hal', text: 'Two for one today' });
    expect(sent.json()).toMatchObject({
      status: 'sent',
      channel: 'account',
      delivered: true,
      cost_usd: 0.002,
    });
    const promo = await arriving;
    expect(promo.getChildText('body')).toBe('Two for one today');
    // A second promo from the same sender within a day is over the limit.
    const again = await app.call('POST', '/v1/promo/send', { to: 'hal', text: 'More' });
    expect(again.statusCode).toBe(429);

    const confirmed = hal.next(marked('consent'));
    await hal.xmpp.send(xml('message', { to: promo.attrs.from, type: 'chat' }, xml('body', {}, ' Stop ')));
    expect((await confirmed).getChildText('body')).toMatch(/no more promotional messages/);
    const event = await eventWhere((body) => body.type === 'message.received' && body.app_id === app.app.id);
    expect(event.data).toMatchObject({
      from: { user_id: 'hal' },
      to: { identity: 'account' },
      text: ' Stop ',
    });

    ctx.clock.advance(24 * 60 * MINUTE);
    const silent = arrivals(hal, 'promo');
    expect(
      (await app.call('POST', '/v1/promo/send', { to: 'hal', text: 'Last chance' })).json(),
    ).toMatchObject({
      delivered: false,
      reason: 'opted_out',
    });
    expect(await silent).toBe('nothing');
    ctx.clock.set(new Date());
  });

  it("keeps a user's last word, STOP then START, though the STOP is handled last", async () => {
    const app = await customer();
    expect(
      (await app.call('POST', '/v1/webhooks', { url: receiver.url, event_types: ['message.received'] }))
        .statusCode,
    ).toBe(201);
    const recorded = (userId: string) =>
      ctx.container.pool.oneFirst(sql.type(z.object({ count: z.number() }))`
        select count(*)::int from webhook_events
        where app_id = ${app.app.id} and (body::jsonb -> 'data' -> 'from' ->> 'user_id') = ${userId}`);
    // ejabberd hands each reply to one of the connected replicas (this app's and other tests') at
    // random: users until this replica takes a STOP and holds it up while the START goes wherever it goes.
    for (let tries = 0; tries < 40; tries += 1) {
      const userId = `kim${tries}`;
      const kim = await app.online(userId);
      const sender = `${kim.credential.user.split('.')[0]}.app@notify.chat.local`;
      const seen: number[] = [];
      watched = { userId, delay: 500, seen };
      await kim.xmpp.send(xml('message', { to: sender, type: 'chat' }, xml('body', {}, 'STOP')));
      await kim.xmpp.send(xml('message', { to: sender, type: 'chat' }, xml('body', {}, 'START')));
      // Both replies handled, wherever.
      for (let waited = 0; (await recorded(userId)) < 2; waited += 1) {
        if (waited === 150) throw new Error(`${userId}'s replies were not both recorded in 15 s`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      watched = null;
      const latest = await ctx.container.pool.oneFirst(sql.type(z.object({ sent_at_us: z.string() }))`
        select sent_at_us::text from promo_consent_replies
        where app_id = ${app.app.id} and user_id = ${userId}`);
      // The STOP, the older reply, was held up here (the START here after it, or elsewhere before it).
      if (!(seen[0]! < Number(latest))) continue;
      expect((await app.call('POST', '/v1/promo/send', { to: userId, text: 'Hi' })).json()).toMatchObject({
        delivered: true,
      });
      return;
    }
    throw new Error('no STOP reached this replica in 40 tries');
  });

  it("takes the time of a reply from the chat server, not from the user's client", async () => {
    const app = await customer();
    const lea = await app.online('lea');
    const sender = `${lea.credential.user.split('.')[0]}.app@notify.chat.local`;
    // A STOP claiming to be from the far future: were its time believed, no START could ever follow.
    const forged = xml('sent', { xmlns: NS, at: String(Number.MAX_SAFE_INTEGER) });
    const stopped = lea.next(marked('consent'));
    await lea.xmpp.send(xml('message', { to: sender, type: 'chat' }, xml('body', {}, 'STOP'), forged));
    expect((await stopped).getChildText('body')).toMatch(/no more promotional messages/);
    const noted = await ctx.container.pool.oneFirst(sql.type(z.object({ sent_at_us: z.string() }))`
      select sent_at_us::text from promo_consent_replies where app_id = ${app.app.id} and user_id = 'lea'`);
    expect(Math.abs(Number(noted) / 1_000 - Date.now())).toBeLessThan(60_000);
    const started = lea.next(marked('consent'));
    await lea.xmpp.send(xml('message', { to: sender, type: 'chat' }, xml('body', {}, 'START')));
    expect((await started).getChildText('body')).toMatch(/again/);
    expect((await app.call('POST', '/v1/promo/send', { to: 'lea', text: 'Hi' })).json()).toMatchObject({
      delivered: true,
    });
  });

  it('sends as a profile when asked, and needs the profile', async () => {
    const app = await customer();
    const ivy = await app.online('ivy');
    const missing = await app.call('POST', '/v1/promo/send', {
      to: 'ivy',
      text: 'Hi',
      via: 'profile',
      from: 'shop',
    });
    expect(missing.statusCode).toBe(404);
    const noFrom = await app.call('POST', '/v1/promo/send', { to: 'ivy', text: 'Hi', via: 'profile' });
    expect(noFrom.statusCode).toBe(422);
    await ctx.container.pool.query(sql.unsafe`
      insert into profiles (app_id, mode, user_id, username, full_name, category, created_at, updated_at)
      values (${app.app.id}, 'test', 'shop', 'The_Shop', 'The Shop', 'retail', now(), now())`);
    const arriving = ivy.next(marked('promo'));
    const sent = await app.call('POST', '/v1/promo/send', {
      to: 'ivy',
      text: 'New stock',
      via: 'profile',
      from: 'shop',
    });
    expect(sent.json()).toMatchObject({ channel: 'profile', delivered: true });
    const promo = await arriving;
    const prefix = ivy.credential.user.split('.')[0];
    expect(promo.attrs.from).toBe(`${prefix}.profile.shop@notify.chat.local`);
    expect(promo.getChild('svc', NS)!.attrs.profile).toBe('The_Shop');
    // The app's own promos are another sender's, with a limit of their own.
    expect(
      (await app.call('POST', '/v1/promo/send', { to: 'ivy', text: 'From the app' })).json().delivered,
    ).toBe(true);
  });

  it('allows 1,000 promos a day from one sender', async () => {
    const app = await customer();
    for (let i = 0; i < 1_000; i += 1) {
      const response = await app.call('POST', '/v1/promo/send', {
        to: `+1555${String(i).padStart(7, '0')}`,
        text: 'Hi',
      });
      if (response.statusCode !== 200) throw new Error(`promo ${i + 1}: ${response.body}`);
    }
    const over = await app.call('POST', '/v1/promo/send', { to: '+15559999999', text: 'Hi' });
    expect(over.statusCode).toBe(429);
  });
});

describe('money', () => {
  it('refuses a live key with an empty balance before anything is sent, and charges a funded one', async () => {
    const broke = await customer({ mode: 'live' });
    const refused = await broke.call('POST', '/v1/otp/send', { to: 'jo' });
    expect(refused.statusCode).toBe(402);
    expect(refused.json().error.code).toBe('PAYMENT_REQUIRED');
    const sends = await ctx.container.pool.oneFirst(
      sql.type(
        z.object({ count: z.number() }),
      )`select count(*)::int as count from messages where app_id = ${broke.app.id}`,
    );
    expect(sends).toBe(0);

    const funded = await customer({ mode: 'live', balanceMicros: 1_000_000 });
    await funded.user('kim');
    const sent = await funded.call('POST', '/v1/otp/send', { to: 'kim' });
    expect(sent.json().cost_usd).toBe(0.005);
    const balance = await ctx.container.pool.oneFirst(
      sql.type(z.object({ balance_micros: z.number() }))`
        select balance_micros::int from accounts where id = ${funded.account.id}`,
    );
    expect(balance).toBe(995_000);
  });
});

describe('phones and opt-outs', () => {
  it('keeps one phone per user and one user per phone; the app’s server may move a phone', async () => {
    const app = await customer();
    expect((await app.call('PUT', '/v1/users/lee/phone', { phone: '+33612345678' })).json()).toMatchObject({
      user_id: 'lee',
      phone: '+33612345678',
      set_by: 'app',
    });
    expect((await app.call('PUT', '/v1/users/max/phone', { phone: '+33612345678' })).statusCode).toBe(200);
    expect((await app.call('GET', '/v1/users/lee/phone')).statusCode).toBe(404);
    expect((await app.call('GET', '/v1/users/max/phone')).json().phone).toBe('+33612345678');
    expect((await app.call('PUT', '/v1/users/max/phone', { phone: '33612345678' })).statusCode).toBe(422);
    expect((await app.call('DELETE', '/v1/users/max/phone')).json()).toEqual({ ok: true, id: 'max' });
    expect((await app.call('DELETE', '/v1/users/max/phone')).statusCode).toBe(404);
  });
});

/** The event of a send, as delivered to the receiver. */
async function eventFor(messageId: string) {
  return eventWhere((body) => (body.data as { id?: string }).id === messageId);
}

async function eventWhere(
  match: (body: { type: string; app_id: string; data: Record<string, unknown> }) => boolean,
) {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    for (const request of receiver.received) {
      const body = JSON.parse(request.body);
      if (match(body)) return body as { type: string; data: Record<string, unknown> };
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('no such event in time');
}
