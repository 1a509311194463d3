/**
 * Chat in an app: a chat credential from your app's server turned into a connected `@xmpp/client`
 * session that renews its credential when it reconnects. Import from `@svc-bundle/sdk/chat`; needs
 * the `@xmpp/client` package (a peer dependency), and a global `WebSocket` (browsers, React Native;
 * on Node 20, `globalThis.WebSocket = (await import('ws')).WebSocket`).
 * @module
 */
import { type Client, client, type Options, xml } from '@xmpp/client';
import type { Output } from './call.js';
import { CallbackRefusal, endSignal, holdCredential } from './held.js';
import { streamManagementEnabled } from './stream-management.js';

/** What `chat.tokens.create` (and an org member's or identity's `chat-token`) answers. */
export type ChatCredential = Output<'chat.tokens.create'>;

export interface ChatOptions {
  /**
   * Asks your app's server for a credential (it calls `chat.tokens.create` with its secret key).
   * Called to connect, and again on a reconnection when the credential in hand has expired (or
   * expires within `renewBeforeSeconds`) or the server refused it (replaced by a newer one, revoked).
   * A rejection ends the session: it is how your server says no.
   */
  credential: () => Promise<ChatCredential>;
  /** The session's resource (its device name); by default the server assigns one. */
  resource?: string;
  /** Renew a credential that expires within this many seconds before logging in with it; default 30. */
  renewBeforeSeconds?: number;
  /**
   * Send an initial `<presence/>` on every login, so that the server routes messages to the session
   * and stored ones arrive; default true. Turn it off to send a presence of your own on `online`.
   */
  presence?: boolean;
}

export interface ChatSession {
  /** The xmpp.js client, online. It reconnects by itself (`online` is emitted again each time). */
  readonly xmpp: Client;
  /** The credential of the current login. */
  readonly credential: ChatCredential;
  /**
   * Settles when the session ends for good: with `undefined` after `stop()`, or with the error that
   * ended it (your `credential` callback rejected, or the server refused a fresh credential).
   */
  readonly ended: Promise<Error | undefined>;
  /** Goes offline and stops reconnecting. */
  stop(): Promise<void>;
}

/** How long to wait for the server's echo of the initial presence. */
const PRESENCE_ECHO_WAIT_MS = 5_000;

/** Connects to the bundle's chat server with credentials from `options.credential`. */
export async function connectChat(options: ChatOptions): Promise<ChatSession> {
  const held = await holdCredential(
    options.credential,
    (credential) => Date.parse(credential.expires_at),
    options.renewBeforeSeconds,
  );
  const { ended, end } = endSignal<Error | undefined>();

  const logIn = async (authenticate: Authenticate, mechanism: string) => {
    if (!held.fresh && held.expiring()) await held.renew();
    const login = () =>
      // The third argument (a SASL2 user agent) is optional at run time despite its type.
      authenticate(
        { username: held.current.user, password: held.current.password },
        mechanism,
        undefined as never,
      );
    try {
      await login();
    } catch (error) {
      // A credential kept from an earlier login may have been replaced or revoked since: ask once.
      if (held.fresh || !isSaslFailure(error) || error.condition !== 'not-authorized') throw error;
      await held.renew();
      await login();
    }
  };

  let stopping = false;
  const xmpp = client({
    service: held.current.ws,
    domain: held.current.domain,
    resource: options.resource,
    credentials: async (authenticate, mechanisms, _fast, entity) => {
      try {
        // PLAIN only where the connection is encrypted or local, as xmpp.js itself decides.
        const mechanism = entity.isSecure()
          ? mechanisms[0]
          : mechanisms.find((offered) => offered !== 'PLAIN');
        if (mechanism === undefined)
          throw Object.assign(new Error('the chat server offers no mechanism usable here'), {
            name: 'SASLError',
            condition: 'invalid-mechanism',
          });
        await logIn(authenticate, mechanism);
      } catch (error) {
        // A refused login leaves the stream open, so xmpp.js would neither finish nor retry: end the
        // session. (A connection lost on the way is no refusal: xmpp.js reconnects and logs in again.)
        if (!stopping && (error instanceof CallbackRefusal || isSaslFailure(error))) {
          const reason = error instanceof CallbackRefusal ? error.cause : error;
          void stop().then(() => end(reason instanceof Error ? reason : new Error(String(reason))));
        }
        throw error;
      } finally {
        held.fresh = false;
      }
    },
  });
  const stop = async () => {
    stopping = true;
    await xmpp.stop().catch(() => {});
  };
  xmpp.on('error', () => {}); // what ends the session is in `ended`; the rest, xmpp.js recovers from
  // The initial presence, once stream management is on, so that the server routes messages here and
  // delivers stored ones: after the first login below, and after each reconnection. Done when the
  // server echoes it: a message sent to the user before then may be stored for a later login.
  const announce = async () => {
    await streamManagementEnabled(xmpp);
    if (options.presence === false) return;
    const echoed = ownPresenceEcho(xmpp);
    await xmpp.send(xml('presence'));
    await echoed;
  };
  let started = false;
  xmpp.on('online', () => {
    if (started) void announce().catch(() => {});
  });

  try {
    await xmpp.start();
  } catch (error) {
    await stop();
    throw error instanceof CallbackRefusal ? error.cause : error;
  }
  await announce();
  started = true;
  return {
    xmpp,
    get credential() {
      return held.current;
    },
    ended,
    stop: async () => {
      await stop();
      end(undefined);
    },
  };
}

/** xmpp.js's login function, handed to the `credentials` callback. */
type Authenticate = Parameters<Extract<Options['credentials'], (...args: never[]) => unknown>>[0];

/** The server's answer to a login it refused (xmpp.js's SASLError, with its RFC 6120 condition). */
const isSaslFailure = (error: unknown): error is Error & { condition: string } =>
  error instanceof Error && error.name === 'SASLError';

/** The server's echo of the session's own presence (it is available from then on), or 5 s. */
function ownPresenceEcho(xmpp: Client) {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      xmpp.removeListener('stanza', onStanza);
      resolve();
    };
    const onStanza = (stanza: ReturnType<typeof xml>) => {
      if (stanza.is('presence') && !stanza.attrs.type && stanza.attrs.from === xmpp.jid?.toString()) done();
    };
    const timer = setTimeout(done, PRESENCE_ECHO_WAIT_MS);
    xmpp.on('stanza', onStanza);
  });
}
