import { lookup as dnsLookup } from 'node:dns';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { type BlockList, isIP, type LookupFunction } from 'node:net';
import { allowList, isAllowedAddress } from '../platform/addresses.js';

export interface WebhookSenderOptions {
  /** Whole attempt: connect, request, response headers and the capped body read. Spec: 5000. */
  timeoutMs: number;
  /** Response bytes kept as the excerpt (the rest is not read; the socket is dropped). e.g. 1024 */
  excerptBytes: number;
  /** CIDRs (IPv4 or IPv6, e.g. "127.0.0.0/8", "::1/128") an operator allows although they are private/loopback/etc. */
  allowedNetworks: string[];
  /** Sent as User-Agent. */
  userAgent: string;
}

export interface WebhookRequest {
  url: string;
  /** Sent beside Host, User-Agent, Content-Type (JSON) and Content-Length: the signatures. */
  headers: Record<string, string>;
  /** JSON text. */
  body: string;
}

export type WebhookOutcome =
  | { kind: 'response'; status: number; latencyMs: number; excerpt: string }
  | {
      kind: 'failure';
      reason: 'timeout' | 'forbidden-address' | 'dns' | 'connection' | 'tls' | 'invalid-url';
      message: string;
      latencyMs: number;
    };

type FailureReason = Extract<WebhookOutcome, { kind: 'failure' }>['reason'];

export interface WebhookSender {
  send(request: WebhookRequest): Promise<WebhookOutcome>;
  /** Destroys the pooled sockets; deliveries still under way fail with 'connection'. */
  close(): void;
}

class ForbiddenAddressError extends Error {}

/**
 * dns.lookup that refuses a name if any of its addresses is forbidden, so the check sees what the socket
 * will connect to at delivery time (DNS rebinding cannot slip a private address past an earlier check).
 * Node 20 asks with `all: true` when it may try several addresses (autoSelectFamily), else for one.
 */
function checkedLookup(allowed: BlockList): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '');
      const refused = addresses.find((entry) => !isAllowedAddress(entry.address, allowed));
      if (refused) {
        // Not which address: the app reads this message, and must not learn the operator's DNS.
        return callback(new ForbiddenAddressError(`${hostname} resolves to a forbidden address`), '');
      }
      const [first] = addresses;
      // Node would throw outside any handler on an empty list; getaddrinfo reports no address as an error.
      if (!first)
        return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '');
      if (options.all) return callback(null, addresses);
      callback(null, first.address, first.family);
    });
  };
}

/**
 * Certificate and handshake failures: Node's ERR_TLS_/ERR_SSL_ codes, OpenSSL's verify codes, and EPROTO,
 * which is how OpenSSL's handshake errors arrive (e.g. "wrong version number" from a plain HTTP port).
 */
const TLS_ERROR =
  /^ERR_(TLS|SSL)_|^EPROTO$|CERT|UNABLE_TO_|CRL|INVALID_CA|INVALID_PURPOSE|PATH_LENGTH_EXCEEDED/;

function failureReason(error: NodeJS.ErrnoException): FailureReason {
  if (error instanceof ForbiddenAddressError) return 'forbidden-address';
  if (error.syscall === 'getaddrinfo' || error.code === 'ENOTFOUND') return 'dns';
  if (error.code && TLS_ERROR.test(error.code)) return 'tls';
  return 'connection';
}

/**
 * Where an attempt goes: what node:http connects to and the Host header it would send there, or why it
 * cannot go there.
 */
type Target =
  | { secure: boolean; hostname: string; port: number | undefined; path: string; host: string }
  | { refused: FailureReason; message: string };

/** Endpoint URLs whose targets are kept; past it, the next URL starts the set over. */
const TARGETS_KEPT = 4_096;

/** The target of a webhook URL: what it is follows from its text alone (its address, from DNS later). */
function targetOf(raw: string, allowed: BlockList): Target {
  if (!URL.canParse(raw)) return { refused: 'invalid-url', message: 'the webhook URL is not a valid URL' };
  const url = new URL(raw);
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { refused: 'invalid-url', message: 'a webhook URL must be http or https' };
  if (url.username || url.password)
    return { refused: 'invalid-url', message: 'a webhook URL must not carry credentials' };
  // Node connects to an IP literal without calling lookup, so the literal is checked here.
  const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(literal) && !isAllowedAddress(literal, allowed))
    return { refused: 'forbidden-address', message: `${literal} is not an allowed address` };
  return {
    secure: url.protocol === 'https:',
    hostname: literal,
    port: url.port === '' ? undefined : Number(url.port),
    path: `${url.pathname}${url.search}`,
    // URL leaves out a scheme's default port, and keeps an IPv6 literal in brackets, as Host wants it.
    host: url.host,
  };
}

/**
 * The only way webhook deliveries leave: POSTs to app-chosen URLs, never to the operator's own networks.
 * Redirects are answers, not followed. Keep-alive agents let deliveries to one receiver share sockets.
 */
export function createWebhookSender(options: WebhookSenderOptions): WebhookSender {
  const allowed = allowList(options.allowedNetworks);
  const lookup = checkedLookup(allowed);
  // Idle pooled sockets go before the common 5 s server keep-alive, so a reused one is rarely being closed.
  const agentOptions = { keepAlive: true, timeout: 4_000, lookup };
  const httpAgent = new HttpAgent(agentOptions);
  const httpsAgent = new HttpsAgent(agentOptions);
  /**
   * Each endpoint URL parsed and checked once, not at every attempt: a URL object and node:http's
   * reading of it cost more than the rest of an attempt's request on a keep-alive socket.
   */
  const targets = new Map<string, Target>();

  function send(webhook: WebhookRequest): Promise<WebhookOutcome> {
    const started = performance.now();
    const latencyMs = () => Math.round(performance.now() - started);
    const failure = (reason: FailureReason, message: string): WebhookOutcome => ({
      kind: 'failure',
      reason,
      message,
      latencyMs: latencyMs(),
    });

    let target = targets.get(webhook.url);
    if (target === undefined) {
      if (targets.size >= TARGETS_KEPT) targets.clear();
      target = targetOf(webhook.url, allowed);
      targets.set(webhook.url, target);
    }
    if ('refused' in target) return Promise.resolve(failure(target.refused, target.message));

    // The headers as node:http's raw list, which it checks and writes as they come, rather than storing
    // each in its header map (setHeader) and looking Host up there: the larger part of the sender's cost.
    const headers = [
      'Host',
      target.host,
      'User-Agent',
      options.userAgent,
      'Content-Type',
      'application/json',
      'Content-Length',
      String(Buffer.byteLength(webhook.body)),
    ];
    for (const name in webhook.headers) headers.push(name, webhook.headers[name]!);
    const request = (target.secure ? httpsRequest : httpRequest)({
      hostname: target.hostname,
      port: target.port,
      path: target.path,
      method: 'POST',
      agent: target.secure ? httpsAgent : httpAgent,
      headers,
    });

    return new Promise((resolve) => {
      let settled = false;
      const settle = (outcome: WebhookOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const timer = setTimeout(() => {
        settle(failure('timeout', `no complete answer within ${options.timeoutMs} ms`));
        request.destroy();
      }, options.timeoutMs);

      request.on('error', (error) => settle(failure(failureReason(error), error.message)));
      request.on('response', (response: IncomingMessage) => {
        const kept: Buffer[] = [];
        let receivedBytes = 0;
        const answer = () =>
          settle({
            kind: 'response',
            status: response.statusCode ?? 0,
            latencyMs: latencyMs(),
            excerpt: Buffer.concat(kept).toString('utf8'),
          });
        response.on('data', (chunk: Buffer) => {
          kept.push(chunk.subarray(0, options.excerptBytes - receivedBytes));
          receivedBytes += chunk.length;
          if (receivedBytes < options.excerptBytes) return;
          answer();
          // The rest is never read: dropping the socket keeps an endless body from costing anything.
          response.destroy();
        });
        response.on('end', answer);
        // A body cut short still came after a status: that is the receiver's answer.
        response.on('error', answer);
      });
      request.end(webhook.body);
    });
  }

  return {
    send,
    close() {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}
