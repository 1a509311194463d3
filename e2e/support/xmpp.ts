import { type Client, client, xml } from '@xmpp/client';
import type { Element } from '@xmpp/xml';
import WebSocket from 'ws';
import { streamManagementEnabled } from '../../sdk/src/stream-management.js';

// @xmpp/client opens its WebSocket through the global constructor, which Node 20 does not have.
(globalThis as { WebSocket?: unknown }).WebSocket ??= WebSocket;

export interface ChatCredential {
  jid: string;
  user: string;
  domain: string;
  password: string;
  ws: string;
  muc: string;
  room_prefix: string;
  nickname: string;
  mam: boolean;
  expires_at: string;
}

export interface ChatSession {
  xmpp: Client;
  credential: ChatCredential;
  /** Resolves with the next stanza that matches. */
  next(match: (stanza: Element) => boolean, timeoutMs?: number): Promise<Element>;
  stop(): Promise<void>;
}

/**
 * Logs in over WebSocket (SASL PLAIN) with a minted credential; rejects when the server refuses.
 * A resource given as a function is asked for after the password was accepted and before the session
 * is bound: a test holds the login there. `signingIn` leaves the session without its initial presence
 * (signed in, not yet available).
 */
export async function connect(
  credential: ChatCredential,
  resource: string | (() => Promise<string>) = 'e2e',
  { signingIn = false }: { signingIn?: boolean } = {},
): Promise<ChatSession> {
  const xmpp = client({
    service: credential.ws,
    domain: credential.domain,
    // @xmpp/resource-binding awaits a function's result as the resource; its typings describe an
    // older callback form.
    resource: resource as never,
    // SASL PLAIN, as the bundle's clients use it: the only mechanism external authentication offers.
    // (The third argument, a SASL2 user agent, is optional at run time despite its type.)
    credentials: (authenticate) =>
      authenticate({ username: credential.user, password: credential.password }, 'PLAIN', undefined as never),
  });
  xmpp.on('error', () => {});
  xmpp.reconnect.stop();
  const waiting: { match: (stanza: Element) => boolean; resolve: (stanza: Element) => void }[] = [];
  const seen: Element[] = [];
  xmpp.on('stanza', (stanza: Element) => {
    const index = waiting.findIndex((waiter) => waiter.match(stanza));
    if (index >= 0) waiting.splice(index, 1)[0]!.resolve(stanza);
    else seen.push(stanza);
  });
  await xmpp.start();
  await streamManagementEnabled(xmpp);
  if (!signingIn) await xmpp.send(xml('presence'));
  return {
    xmpp,
    credential,
    next: (match, timeoutMs = 10_000) => {
      const earlier = seen.findIndex(match);
      if (earlier >= 0) return Promise.resolve(seen.splice(earlier, 1)[0]!);
      return new Promise((resolve, reject) => {
        const waiter = {
          match,
          resolve: (stanza: Element) => {
            clearTimeout(timer);
            resolve(stanza);
          },
        };
        // A waiter that gave up is taken off: the stanza it waited for, arriving later, goes to
        // the next one that asks for it.
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(waiter), 1);
          reject(new Error('no matching stanza in time'));
        }, timeoutMs);
        waiting.push(waiter);
      });
    },
    stop: async () => {
      await xmpp.stop().catch(() => {});
    },
  };
}

/**
 * Waits for the server's echo of the session's initial presence: only then is the session available.
 * A message to the user's bare JID just before (a one-time code sent the instant the login ends) goes
 * to offline storage and, racing the presence, may stay there until the next login.
 */
export async function available(session: ChatSession, timeoutMs?: number): Promise<void> {
  const self = session.xmpp.jid?.toString();
  await session.next((stanza) => stanza.is('presence') && stanza.attrs.from === self, timeoutMs);
}

/** Why a login failed: the SASL condition (e.g. not-authorized), or the error's message. */
export async function loginFailure(credential: ChatCredential): Promise<string | null> {
  try {
    const session = await connect(credential);
    await session.stop();
    return null;
  } catch (error) {
    return (error as { condition?: string }).condition ?? (error as Error).message;
  }
}

export async function joinRoom(session: ChatSession, room: string): Promise<Element> {
  const nick = session.credential.nickname;
  const joined = session.next((stanza) => stanza.is('presence') && stanza.attrs.from === `${room}/${nick}`);
  await session.xmpp.send(
    xml(
      'presence',
      { to: `${room}/${nick}` },
      xml('x', { xmlns: 'http://jabber.org/protocol/muc' }, xml('history', { maxstanzas: '0' })),
    ),
  );
  return joined;
}

export function bodyOf(stanza: Element): string | undefined {
  return stanza.getChildText('body') ?? undefined;
}

/** Pages through an archive with XEP-0313 (mam:2): the user's own without `to`, a room's with it. */
export async function archive(session: ChatSession, to?: string): Promise<string[]> {
  const queryid = `q${Math.random().toString(36).slice(2)}`;
  const bodies: string[] = [];
  const onStanza = (stanza: Element) => {
    const result = stanza.getChild('result', 'urn:xmpp:mam:2');
    if (stanza.is('message') && result?.attrs.queryid === queryid) {
      const body = result
        .getChild('forwarded', 'urn:xmpp:forward:0')
        ?.getChild('message')
        ?.getChildText('body');
      if (body) bodies.push(body);
    }
  };
  session.xmpp.on('stanza', onStanza);
  try {
    await session.xmpp.iqCaller.request(
      xml('iq', { type: 'set', ...(to ? { to } : {}) }, xml('query', { xmlns: 'urn:xmpp:mam:2', queryid })),
      10_000,
    );
  } finally {
    session.xmpp.removeListener('stanza', onStanza);
  }
  return bodies;
}

// ----- rooms with MUC/Sub subscribers (businesses, circles) -------------------------------------

const MUCSUB_MESSAGES = 'urn:xmpp:mucsub:nodes:messages';
const MUC_USER = 'http://jabber.org/protocol/muc#user';
/** How long a helper waits for something that should not come. */
const QUIET_MS = 1_500;

/** Numbers the stanzas these helpers send. */
let sent = 0;
/** Posts in a room (without joining: every member is a MUC/Sub subscriber); its id. */
export async function post(session: ChatSession, room: string, text: string) {
  const id = `b${++sent}`;
  await session.xmpp.send(xml('message', { to: room, type: 'groupchat', id }, xml('body', {}, text)));
  return id;
}

/** The MUC/Sub delivery of a room's message to a subscriber, with the text. */
export const mucsubMessage = (room: string, text: string) => (stanza: Element) =>
  stanza.is('message') &&
  stanza.attrs.from === room &&
  stanza.getChild('event', 'http://jabber.org/protocol/pubsub#event')?.getChild('items')?.attrs.node ===
    MUCSUB_MESSAGES &&
  stanza.toString().includes(text);

/** The message inside a MUC/Sub event. */
export const innerMessage = (event: Element) =>
  event.getChild('event')!.getChild('items')!.getChild('item')!.getChild('message')!;

/** Whether a post arrives at `to` within the wait. */
export async function arrives(to: ChatSession, room: string, text: string) {
  return to.next(mucsubMessage(room, text), QUIET_MS).then(
    () => true,
    () => false,
  );
}

/** The error a post of `from` bounced with, or null when none came back. */
export async function bounce(from: ChatSession, id: string) {
  return from
    .next(
      (stanza) => stanza.is('message') && stanza.attrs.id === id && stanza.attrs.type === 'error',
      QUIET_MS,
    )
    .then(
      (error) => {
        const condition = error
          .getChild('error')!
          .children.find((child) => typeof child !== 'string' && child.name !== 'text') as Element;
        return condition.name;
      },
      () => null,
    );
}

/** The statuses of a MUC presence (110: about oneself, 321: sent out by an affiliation change). */
export const statuses = (presence: Element) =>
  (presence.getChild('x', MUC_USER)?.getChildren('status') ?? []).map(
    (status) => status.attrs.code as string,
  );

/** Enters a room under a nickname; the presence that answers (type error when refused). */
export async function enter(session: ChatSession, room: string, nick: string) {
  const answer = session.next(
    (stanza) =>
      stanza.is('presence') &&
      stanza.attrs.from === `${room}/${nick}` &&
      (stanza.attrs.type === 'error' ||
        (stanza.attrs.type === undefined && statuses(stanza).includes('110'))),
  );
  await session.xmpp.send(
    xml('presence', { to: `${room}/${nick}` }, xml('x', { xmlns: 'http://jabber.org/protocol/muc' })),
  );
  return answer;
}

/** Whether the server closes a session within a few seconds. */
export async function closed(session: ChatSession) {
  for (let waited = 0; waited < 3_000; waited += 50) {
    if (session.xmpp.status !== 'online') return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}

/** The rooms in an account's bookmarks (XEP-0048 in private storage). */
export async function bookmarks(session: ChatSession) {
  return (await conferences(session)).map((room) => room.attrs.jid as string);
}

/** The bookmarked rooms a client joins on login (a muted board is bookmarked, not joined). */
export async function joinedOnLogin(session: ChatSession) {
  return (await conferences(session))
    .filter((room) => room.attrs.autojoin === 'true')
    .map((room) => room.attrs.jid as string);
}

async function conferences(session: ChatSession) {
  const id = `bm${++sent}`;
  const answer = session.next((stanza) => stanza.is('iq') && stanza.attrs.id === id);
  await session.xmpp.send(
    xml(
      'iq',
      { type: 'get', id },
      xml('query', { xmlns: 'jabber:iq:private' }, xml('storage', { xmlns: 'storage:bookmarks' })),
    ),
  );
  const storage = (await answer).getChild('query')?.getChild('storage');
  return storage?.getChildren('conference') ?? [];
}

/** A room's message to an occupant, with the text. */
export const roomMessage = (room: string, text: string) => (stanza: Element) =>
  stanza.is('message') &&
  stanza.attrs.type === 'groupchat' &&
  stanza.attrs.from?.startsWith(`${room}/`) &&
  bodyOf(stanza) === text;

/** Whether a post reaches an occupant of the room within the wait. */
export async function hears(to: ChatSession, room: string, text: string) {
  return to.next(roomMessage(room, text), QUIET_MS).then(
    () => true,
    () => false,
  );
}

/** An OTP the control plane's messaging component delivered. */
export const isOtp = (stanza: Element) =>
  stanza.is('message') && stanza.getChild('svc', 'urn:svc:messaging:0')?.attrs.purpose === 'otp';
