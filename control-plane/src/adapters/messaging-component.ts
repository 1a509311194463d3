/// <reference path="./xmpp-component.d.ts" />
import { randomUUID } from 'node:crypto';
import { component, type XmlElement, xml } from '@xmpp/component';
import { UpstreamError } from '../platform/errors.js';

/**
 * The control plane's external component on ejabberd (XEP-0114): one XMPP connection that speaks for
 * every messaging identity (`<app prefix>.<name>@<messaging domain>`). Each delivery is one IQ to the
 * chat host that mod_svc_scope answers with the outcome (ejabberd/mod_svc_scope.erl); replies of users
 * and the server's notices of arrival come back as messages.
 *
 * Several control-plane processes may be connected at once (replicas, tests): ejabberd hands what it
 * routes to the domain to any one of them, so notices and replies are handled by whoever gets them
 * (the state is in PostgreSQL). A delivery's answer alone comes back to the connection that asked.
 */

export const MESSAGING_NS = 'urn:svc:messaging:0';

/** What mod_svc_scope answers about a delivery. */
export type DeliveryStatus = 'online' | 'stored' | 'no-account' | 'blocked' | 'refused';
const STATUSES: ReadonlySet<string> = new Set(['online', 'stored', 'no-account', 'blocked', 'refused']);

export interface Delivery {
  /** The message id: the server's notice of arrival names it. */
  id: string;
  /** The sending identity's local part, on the messaging domain. */
  from: string;
  /** The recipient's bare JID on the chat domain. */
  to: string;
  body: string;
  /** Attributes of the `<svc xmlns='urn:svc:messaging:0'/>` element client apps read. */
  marker: Record<string, string>;
  /** Another sender the recipient's block list is checked for (a profile's own chat address). */
  onBehalfOf?: string;
  /** Kept out of message archives (XEP-0334 no-permanent-store), still stored offline: OTPs. */
  transient?: boolean;
}

export interface InboundMessage {
  /** The sender's full JID (a user of the chat domain). */
  from: string;
  /** The messaging identity's local part it was sent to. */
  to: string;
  body: string;
  /** When ejabberd took it from the user, in microseconds since the epoch (mod_svc_scope's stamp). */
  sentAtMicros?: number;
}

export interface ArrivalNotice {
  id: string;
  /** The full JID of the session it reached. */
  to: string;
}

export interface MessagingComponentOptions {
  url: string;
  domain: string;
  secret: string;
  chatDomain: string;
  onError: (error: unknown) => void;
  /** How long a delivery waits for the connection to be (re)established (default 10 s). */
  connectWaitMs?: number;
  /** How long a delivery waits for the server's answer (default 10 s). */
  answerTimeoutMs?: number;
  /** How often an online stream gets a whitespace keepalive (default KEEPALIVE_MS). */
  keepaliveMs?: number;
}

const RETRY_MS = [250, 500, 1000, 2000, 5000];
/**
 * A whitespace keepalive this often while online: a proxy in front of ejabberd (the scale profile's
 * HAProxy) cuts a stream idle past its tunnel timeout, and a dead stream shows on the next write.
 */
export const KEEPALIVE_MS = 60_000;

export function createMessagingComponent(options: MessagingComponentOptions) {
  const connectWaitMs = options.connectWaitMs ?? 10_000;
  const answerTimeoutMs = options.answerTimeoutMs ?? 10_000;
  const xmpp = component({ service: options.url, domain: options.domain, password: options.secret });
  // Reconnection is ours: the library's gives up after one failed attempt.
  xmpp.reconnect.stop();
  const pending = new Map<string, (outcome: string) => void>();
  const onlineWaiters = new Set<() => void>();
  const inboundListeners: ((message: InboundMessage) => void)[] = [];
  const arrivalListeners: ((notice: ArrivalNotice) => void)[] = [];
  let stopped = true;
  let attempt = 0;
  let retry: NodeJS.Timeout | undefined;
  let keepalive: NodeJS.Timeout | undefined;
  /** The attempt under way: a stop waits for it, since closing a stream mid-open throws outside it. */
  let connecting: Promise<void> | undefined;

  const connect = async () => {
    if (stopped || xmpp.status === 'online' || xmpp.status === 'connecting') return;
    connecting = (async () => {
      try {
        if (xmpp.status === 'offline') await xmpp.start();
        else await xmpp.reconnect.reconnect();
        attempt = 0;
      } catch (error) {
        options.onError(error);
        scheduleConnect();
      }
    })();
    await connecting;
  };
  const scheduleConnect = () => {
    if (stopped) return;
    clearTimeout(retry);
    retry = setTimeout(connect, RETRY_MS[Math.min(attempt++, RETRY_MS.length - 1)]);
  };
  xmpp.on('error', options.onError);
  xmpp.on('disconnect', scheduleConnect);
  xmpp.on('online', () => {
    for (const waiter of onlineWaiters) waiter();
    onlineWaiters.clear();
  });

  xmpp.on('stanza', (stanza: XmlElement) => {
    try {
      if (stanza.is('iq')) return answered(stanza);
      if (stanza.is('message')) return received(stanza);
    } catch (error) {
      options.onError(error);
    }
  });

  function answered(iq: XmlElement) {
    const id = iq.attrs.id ?? '';
    let outcome: string;
    if (iq.attrs.type === 'result') {
      outcome = iq.getChild('delivery', MESSAGING_NS)?.attrs.status ?? 'error:no-status';
    } else if (iq.attrs.type === 'error') {
      const error = iq.getChild('error');
      const condition = error?.children.find((child) => typeof child !== 'string' && child.name !== 'text');
      const text = error?.getChildText('text', 'urn:ietf:params:xml:ns:xmpp-stanzas') ?? '';
      outcome = `error:${typeof condition === 'object' ? condition.name : 'unknown'}: ${text}`;
    } else {
      return;
    }
    // An answer after its delivery gave up waiting finds nobody.
    const resolve = pending.get(id);
    pending.delete(id);
    resolve?.(outcome);
  }

  function received(message: XmlElement) {
    const from = message.attrs.from ?? '';
    const notice = message.getChild('delivered', MESSAGING_NS);
    if (notice) {
      // Only the chat host itself sends notices: a user's client can never send from the bare domain.
      if (from === options.chatDomain && notice.attrs.id && notice.attrs.to) {
        for (const listener of arrivalListeners) listener({ id: notice.attrs.id, to: notice.attrs.to });
      }
      return;
    }
    const type = message.attrs.type ?? 'normal';
    const body = message.getChildText('body');
    const to = message.attrs.to ?? '';
    const at = to.indexOf('@');
    if ((type !== 'chat' && type !== 'normal') || !body || at <= 0) return;
    if (to.slice(at + 1).split('/')[0] !== options.domain) return;
    const sentAtMicros = Number(message.getChild('sent', MESSAGING_NS)?.attrs.at);
    for (const listener of inboundListeners)
      listener({
        from,
        to: to.slice(0, at),
        body,
        ...(Number.isSafeInteger(sentAtMicros) ? { sentAtMicros } : {}),
      });
  }

  async function whenOnline() {
    if (xmpp.status === 'online') return;
    if (stopped) throw new UpstreamError('ejabberd', 'the messaging component is stopped');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        onlineWaiters.delete(done);
        reject(new UpstreamError('ejabberd', `messaging component not connected within ${connectWaitMs} ms`));
      }, connectWaitMs);
      const done = () => {
        clearTimeout(timer);
        resolve();
      };
      onlineWaiters.add(done);
    });
  }

  return {
    start: async () => {
      stopped = false;
      keepalive = setInterval(() => {
        if (xmpp.status === 'online') xmpp.write(' ').catch(options.onError);
      }, options.keepaliveMs ?? KEEPALIVE_MS);
      keepalive.unref();
      await connect();
    },
    stop: async () => {
      stopped = true;
      clearTimeout(retry);
      clearInterval(keepalive);
      await connecting;
      await xmpp.stop().catch(() => {});
    },
    status: () => xmpp.status,

    /** Hands a message to ejabberd for one account and answers what became of it. */
    deliver: async (delivery: Delivery): Promise<DeliveryStatus> => {
      await whenOnline();
      // Unique across replicas: each connects its own component for the same domain, and ejabberd
      // routes a bounced answer to any one of them.
      const iqId = `deliver-${randomUUID()}`;
      const message = xml(
        'message',
        {
          xmlns: 'jabber:client',
          id: delivery.id,
          type: 'chat',
          from: `${delivery.from}@${options.domain}`,
          to: delivery.to,
        },
        xml('body', {}, delivery.body),
        xml('svc', { xmlns: MESSAGING_NS, id: delivery.id, ...delivery.marker }),
        // mod_offline keeps a chat message with a body for an offline recipient; no <store/> hint, which
        // mod_mam would take over no-permanent-store and archive an OTP.
        delivery.transient ? xml('no-permanent-store', { xmlns: 'urn:xmpp:hints' }) : undefined,
      );
      const outcome = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(iqId);
          reject(new UpstreamError('ejabberd', `no answer to a delivery within ${answerTimeoutMs} ms`));
        }, answerTimeoutMs);
        pending.set(iqId, (answer) => {
          clearTimeout(timer);
          resolve(answer);
        });
        const iq = xml(
          'iq',
          { type: 'set', id: iqId, from: options.domain, to: options.chatDomain },
          xml(
            'deliver',
            { xmlns: MESSAGING_NS, ...(delivery.onBehalfOf ? { 'on-behalf-of': delivery.onBehalfOf } : {}) },
            message,
          ),
        );
        xmpp.send(iq).catch((error: unknown) => {
          clearTimeout(timer);
          pending.delete(iqId);
          reject(new UpstreamError('ejabberd', `a delivery could not be sent: ${String(error)}`));
        });
      });
      if (!STATUSES.has(outcome)) throw new UpstreamError('ejabberd', `delivery answered ${outcome}`);
      return outcome as DeliveryStatus;
    },

    onInbound: (listener: (message: InboundMessage) => void) => void inboundListeners.push(listener),
    onArrival: (listener: (notice: ArrivalNotice) => void) => void arrivalListeners.push(listener),
  };
}

export type MessagingComponent = ReturnType<typeof createMessagingComponent>;
