/**
 * Real logins to the bundled ejabberd over WebSocket with credentials minted by the running
 * control plane; ejabberd asks the control plane about every login.
 */
import { xml } from '@xmpp/client';
import { describe, expect, it } from 'vitest';
import { useChatSuite } from './support/chat-suite.js';
import {
  api,
  type Customer,
  createCustomer,
  ejabberdAsOperator,
  meterNow,
  stackSettings,
} from './support/stack.js';
import { archive, bodyOf, connect, joinRoom, loginFailure } from './support/xmpp.js';

const chat = useChatSuite();
const { mint, online } = chat;

async function room(customer: Customer, name: string): Promise<string> {
  const response = await api<{ room: string }>(customer, 'POST', '/v1/realtime/chat/rooms', { room: name });
  expect(response.status).toBe(200);
  return response.body.room;
}

/** Two users of one app in one room exchange messages; returns what each received. */
async function converse(customer: Customer) {
  const ana = await online(await mint(customer, 'ana'));
  const bo = await online(await mint(customer, 'bo'));
  const lobby = await room(customer, 'lobby');
  await joinRoom(ana, lobby);
  await joinRoom(bo, lobby);
  const atBo = bo.next((s) => s.is('message') && bodyOf(s) === 'hello from ana');
  await ana.xmpp.send(xml('message', { to: lobby, type: 'groupchat' }, xml('body', {}, 'hello from ana')));
  // bo answers once he has heard ana, as people do: on a cluster, two messages sent at once from
  // sessions on different nodes may reach the room (and its archive) in either order.
  const heard = await atBo;
  const atAna = ana.next((s) => s.is('message') && bodyOf(s) === 'hi ana');
  await bo.xmpp.send(xml('message', { to: lobby, type: 'groupchat' }, xml('body', {}, 'hi ana')));
  const direct = bo.next((s) => s.is('message') && s.attrs.type === 'chat' && bodyOf(s) === 'just for bo');
  await ana.xmpp.send(
    xml('message', { to: bo.credential.jid, type: 'chat' }, xml('body', {}, 'just for bo')),
  );
  return { ana, bo, lobby, received: [heard, ...(await Promise.all([atAna, direct]))] };
}

describe('chat on ejabberd', () => {
  it('logs users in, lets them talk in a room and one to one, and archives it all when mam is on', async () => {
    const customer = await createCustomer(chat.container);
    expect((await api(customer, 'PATCH', '/v1/realtime/app', { mam: true })).status).toBe(200);
    const { ana, bo, lobby, received } = await converse(customer);
    expect(received.map(bodyOf)).toEqual(['hello from ana', 'hi ana', 'just for bo']);
    expect(await archive(ana, lobby)).toEqual(['hello from ana', 'hi ana']);
    expect(await archive(bo)).toEqual(['just for bo']);
  });

  it('archives nothing when mam is off', async () => {
    const customer = await createCustomer(chat.container);
    const { ana, bo, lobby, received } = await converse(customer);
    expect(received).toHaveLength(3);
    expect(await archive(ana, lobby)).toEqual([]);
    expect(await archive(bo)).toEqual([]);
    expect(await archive(ana)).toEqual([]);
  });

  it('refuses a replaced password and accepts the new one', async () => {
    const customer = await createCustomer(chat.container);
    const old = await mint(customer, 'cy');
    const current = await mint(customer, 'cy');
    expect(await loginFailure(old)).toBe('not-authorized');
    expect(await loginFailure(current)).toBeNull();
  });

  it('revoking refuses the next login and drops the open session', async () => {
    const customer = await createCustomer(chat.container);
    const credential = await mint(customer, 'dee');
    const session = await online(credential);
    const dropped = new Promise<void>((resolve) => session.xmpp.once('disconnect', () => resolve()));
    const revoked = await api<{ sessions_closed: number }>(
      customer,
      'DELETE',
      '/v1/realtime/chat/tokens/dee',
    );
    expect(revoked.status).toBe(200);
    expect(revoked.body.sessions_closed).toBe(1);
    await dropped;
    expect(await loginFailure(credential)).toBe('not-authorized');
  });

  it('closes a login whose password was accepted just before the credential was revoked', async () => {
    const customer = await createCustomer(chat.container);
    const credential = await mint(customer, 'fay');
    let passwordAccepted!: () => void;
    const accepted = new Promise<void>((resolve) => {
      passwordAccepted = resolve;
    });
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    // The login passes ejabberd's password check (the control plane said yes), then waits before it
    // binds its session: the revocation lands in between, when there is no session to kick yet.
    const login = connect(credential, async () => {
      passwordAccepted();
      await held;
      return 'held';
    }).then(
      (session) => {
        chat.stopAtEnd(session);
        return new Promise<string>((resolve) => {
          session.xmpp.once('disconnect', () => resolve('closed'));
          setTimeout(() => resolve('survived'), 5_000);
        });
      },
      (error: { condition?: string }) => error.condition ?? 'refused',
    );
    await accepted;
    const revoked = await api<{ sessions_closed: number }>(
      customer,
      'DELETE',
      '/v1/realtime/chat/tokens/fay',
    );
    expect(revoked.body.sessions_closed).toBe(0);
    release();
    expect(await login).toMatch(/^(closed|not-authorized)$/);
    const resources = await ejabberdAsOperator(stackSettings(), 'user_resources', {
      user: credential.user,
      host: credential.domain,
    });
    expect(await resources.json()).toEqual([]);
    // The revocation closes the login that raced it, not the ones after it.
    expect(await loginFailure(await mint(customer, 'fay'))).toBeNull();
  });

  it('refuses every login of a live app whose balance is empty, and takes them again after a top-up', async () => {
    const customer = await createCustomer(chat.container, { mode: 'live', balanceMicros: 1 });
    const credential = await mint(customer, 'newcomer');
    expect(await loginFailure(credential)).toBeNull();
    // Usage metered afterwards takes the balance below zero (what is owed): logins are refused.
    const payer = { accountId: customer.account.id, appId: customer.app.id, mode: 'live' as const };
    await meterNow(chat.container, payer, [{ product: 'writes', metric: 'calls', quantity: 1 }]);
    expect(await loginFailure(credential)).toBe('not-authorized');
    await chat.container.billing.topUp({
      accountId: customer.account.id,
      amountMicros: 1_000,
      reference: 'back',
    });
    expect(await loginFailure(credential)).toBeNull();
  });

  it('counts one monthly active user however often the user logs in', async () => {
    const customer = await createCustomer(chat.container);
    const credential = await mint(customer, 'eve');
    for (let i = 0; i < 3; i += 1) expect(await loginFailure(credential)).toBeNull();
    await chat.container.accrual.flush();
    const usage = await api<{ usage: { product: string; quantity: number }[] }>(
      customer,
      'GET',
      '/v1/realtime/usage?days=1',
    );
    expect(usage.body.usage.filter((row) => row.product === 'chat')).toEqual([
      expect.objectContaining({ metric: 'monthly_active_users', quantity: 1 }),
    ]);
  });
});

describe('ids as apps have them', () => {
  it('logs in an id and its lowercase twin as two users, each receiving only its own messages', async () => {
    const customer = await createCustomer(chat.container);
    const upper = await online(await mint(customer, 'Alice'));
    const lower = await online(await mint(customer, 'alice'));
    const email = await online(await mint(customer, 'Ana.Lopez+chat@example.com'));
    // The server bound each session to the JID its credential names, and they are three.
    const bound = [upper, lower, email].map((session) => session.xmpp.jid?.bare().toString());
    expect(bound).toEqual([upper.credential.jid, lower.credential.jid, email.credential.jid]);
    expect(new Set(bound).size).toBe(3);

    const atUpper = upper.next((s) => s.is('message') && bodyOf(s) === 'for Alice');
    await email.xmpp.send(
      xml('message', { to: upper.credential.jid, type: 'chat' }, xml('body', {}, 'for Alice')),
    );
    expect(String((await atUpper).attrs.from).split('/')[0]).toBe(email.credential.jid);
    await expect(lower.next((s) => s.is('message') && bodyOf(s) === 'for Alice', 1_500)).rejects.toThrow(
      /no matching stanza/,
    );
  });
});

describe('isolation between apps', () => {
  it('keeps a user from reaching another app’s users and from joining its rooms', async () => {
    const first = await createCustomer(chat.container);
    const second = await createCustomer(chat.container);
    const intruder = await online(await mint(first, 'mallory'));
    const victim = await online(await mint(second, 'victor'));
    const theirRoom = await room(second, 'private');

    const refusedMessage = intruder.next((s) => s.is('message') && s.attrs.type === 'error');
    await intruder.xmpp.send(
      xml('message', { to: victim.credential.jid, type: 'chat' }, xml('body', {}, 'psst')),
    );
    expect((await refusedMessage).getChild('error')?.getChild('forbidden')).toBeTruthy();

    const nick = intruder.credential.nickname;
    const refusedJoin = intruder.next((s) => s.is('presence') && s.attrs.type === 'error');
    await intruder.xmpp.send(
      xml('presence', { to: `${theirRoom}/${nick}` }, xml('x', { xmlns: 'http://jabber.org/protocol/muc' })),
    );
    expect((await refusedJoin).getChild('error')?.getChild('forbidden')).toBeTruthy();

    await expect(victim.next((s) => s.is('message') && bodyOf(s) === 'psst', 1_500)).rejects.toThrow(
      /no matching stanza/,
    );
  });
});
