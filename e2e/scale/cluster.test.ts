/**
 * The scale profile's cluster, through real clients: people logged in on different ejabberd nodes
 * talk in one room, participants signalling through different LiveKit nodes meet in one room and are
 * billed once, and the proxy spreads logins over the nodes.
 */
import { xml } from '@xmpp/client';
import { describe, expect, it } from 'vitest';
import { instancesOf } from '../../infra/src/servers/types.js';
import { useChatSuite } from '../support/chat-suite.js';
import { expectBilled, mint as mintLive } from '../support/live-billing.js';
import { useLiveSuite } from '../support/live-suite.js';
import { api, createCustomer, ejabberdAsOperator, stackSettings } from '../support/stack.js';
import { bodyOf, type ChatCredential, joinRoom } from '../support/xmpp.js';

const [nodeA, nodeB] = instancesOf('scale');
if (nodeA === undefined || nodeB === undefined) throw new Error('the scale profile has two instances');
const NODES = [nodeA, nodeB];
const nodeName = (instance: { name: string }) => `svc-scale-${instance.name}@localhost`;

const chat = useChatSuite();
const { mint: mintChat } = chat;
const wsOf = (node: (typeof NODES)[number]) => `ws://127.0.0.1:${node.ports.ejabberdWebSocket}/ws`;

/** The cluster node that holds a user's session, as ejabberd reports it. */
async function nodeOf(credential: ChatCredential): Promise<string> {
  const response = await ejabberdAsOperator(stackSettings(), 'user_sessions_info', {
    user: credential.user,
    host: credential.domain,
  });
  expect(response.status).toBe(200);
  const [session] = (await response.json()) as { node: string }[];
  return session?.node ?? 'none';
}

describe('chat on the ejabberd cluster', () => {
  it('carries a room and one-to-one messages between people logged in on different nodes', async () => {
    const customer = await createCustomer(chat.container);
    const ana = await chat.online(await mintChat(customer, 'ana'), wsOf(nodeA));
    const bo = await chat.online(await mintChat(customer, 'bo'), wsOf(nodeB));
    expect([await nodeOf(ana.credential), await nodeOf(bo.credential)]).toEqual(NODES.map(nodeName));

    const created = await api<{ room: string }>(customer, 'POST', '/v1/realtime/chat/rooms', {
      room: 'lobby',
    });
    expect(created.status).toBe(200);
    const lobby = created.body.room;
    await joinRoom(ana, lobby);
    await joinRoom(bo, lobby);
    const atBo = bo.next((s) => s.is('message') && bodyOf(s) === 'hello from node a');
    await ana.xmpp.send(
      xml('message', { to: lobby, type: 'groupchat' }, xml('body', {}, 'hello from node a')),
    );
    const atAna = ana.next((s) => s.is('message') && bodyOf(s) === 'hello from node b');
    await bo.xmpp.send(
      xml('message', { to: lobby, type: 'groupchat' }, xml('body', {}, 'hello from node b')),
    );
    const direct = bo.next((s) => s.is('message') && s.attrs.type === 'chat' && bodyOf(s) === 'just for bo');
    await ana.xmpp.send(
      xml('message', { to: bo.credential.jid, type: 'chat' }, xml('body', {}, 'just for bo')),
    );
    expect((await Promise.all([atBo, atAna, direct])).map(bodyOf)).toEqual([
      'hello from node a',
      'hello from node b',
      'just for bo',
    ]);
  });

  it('spreads logins through the proxy over both nodes', async () => {
    const customer = await createCustomer(chat.container);
    const credentials = await Promise.all(
      ['cy', 'dee', 'eve', 'fay'].map((user) => mintChat(customer, user)),
    );
    for (const credential of credentials) {
      expect(credential.ws).toBe(stackSettings().SVC_CHAT_WS_URL);
      await chat.online(credential);
    }
    const nodes = await Promise.all(credentials.map(nodeOf));
    expect(new Set(nodes)).toEqual(new Set(NODES.map(nodeName)));
  });
});

describe('live rooms on the LiveKit nodes', () => {
  const live = useLiveSuite();

  it('lets participants signalling through different nodes meet in one room, billed once', async () => {
    const customer = await createCustomer(live.container, { mode: 'live', balanceMicros: 10_000_000 });
    const price = await live.priceBeyondAllowance(customer, 'calls', 'hd_minutes');
    const tokens = await Promise.all(
      ['host', 'guest'].map((identity) => mintLive(customer, { room: 'meet', identity, kind: 'call' })),
    );
    expect(tokens[0]?.url).toBe(stackSettings().SVC_LIVEKIT_PUBLIC_URL);
    const [host, guest] = await Promise.all(
      tokens.map((token, index) =>
        live.join(`ws://127.0.0.1:${NODES[index]?.ports.livekitHttp}`, token.token),
      ),
    );
    if (host === undefined || guest === undefined) throw new Error('both joined');
    await host.publishAudio();
    await guest.publishAudio();
    await guest.waitForRemoteTrack('host', 'audio');
    await host.waitForRemoteTrack('guest', 'audio');
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await Promise.all([host.leave(), guest.leave()]);

    // Their presence once, from the room's node alone, whichever node each participant reached.
    await expectBilled(customer, 'calls', 'hd_minutes', price, [host, guest]);
  });
});
