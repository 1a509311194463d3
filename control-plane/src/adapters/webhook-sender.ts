import { lookup as dnsLookup } from 'node:dns';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';

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
  headers: Record<string, string>;
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

/** The networks in `cidrs` as one BlockList; throws naming the first entry that is not a CIDR. */
export function allowList(cidrs: string[]): BlockList {
  return networkList(cidrs);
}

function networkList(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const cidr of cidrs) {
    const [network = '', prefix = '', ...rest] = cidr.split('/');
    const family = network.includes('%') ? 0 : isIP(network);
    const bits = Number(prefix);
    if (family === 0 || rest.length > 0 || !/^\d{1,3}$/.test(prefix) || bits > (family === 6 ? 128 : 32)) {
      throw new Error(`"${cidr}" is not a network in CIDR notation, such as 10.0.0.0/8 or fd00::/8`);
    }
    list.addSubnet(network, bits, family === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

/** Nothing an app may point a webhook at: they reach the host itself, its networks or nothing public. */
const FORBIDDEN = networkList([
  '0.0.0.0/8', // "this network": 0.0.0.0 reaches the local host
  '10.0.0.0/8',
  '100.64.0.0/10', // carrier-grade NAT
  '127.0.0.0/8',
  '169.254.0.0/16', // link-local, with the cloud metadata service at 169.254.169.254
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4', // multicast
  '240.0.0.0/4', // reserved, and the broadcast 255.255.255.255
  '::/96', // unspecified, and the deprecated IPv4-compatible ::a.b.c.d
  '::1/128',
  '64:ff9b:1::/48', // local-use NAT64 (RFC 8215): translates into the operator's own IPv4 networks
  '100::/64', // discard
  '2001::/32', // Teredo: tunnels to an IPv4 address of the relay's choosing
  '2001:db8::/32',
  '2002::/16', // 6to4: each address embeds an IPv4 address, private ones included
  'fc00::/7', // unique local, with the cloud metadata service at fd00:ec2::254
  'fe80::/10',
  'fec0::/10',
  'ff00::/8',
]);

/**
 * Whether an address may be connected to: false for private, loopback, link-local, metadata, multicast,
 * reserved, unspecified ... unless inside allowedNetworks.
 */
export function isAllowedAddress(address: string, allowed: BlockList): boolean {
  const family = isIP(address);
  // BlockList.check answers false for what it cannot parse, which must not read as "not forbidden".
  if (family === 0) return false;
  const type = family === 6 ? 'ipv6' : 'ipv4';
  if (allowed.check(address, type)) return true;
  const embedded = type === 'ipv6' ? embeddedIPv4(address) : undefined;
  if (embedded !== undefined) return isAllowedAddress(embedded, allowed);
  return !FORBIDDEN.check(address, type);
}

/** The IPv4 address an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) address really reaches. */
function embeddedIPv4(address: string): string | undefined {
  const groups = ipv6Groups(address);
  const prefix = groups.slice(0, 6).join(':');
  if (prefix !== '0:0:0:0:0:ffff' && prefix !== '64:ff9b:0:0:0:0') return undefined;
  const low = Number.parseInt(groups[6]!, 16) * 0x10000 + Number.parseInt(groups[7]!, 16);
  return [24, 16, 8, 0].map((shift) => Math.floor(low / 2 ** shift) % 256).join('.');
}

/** The eight groups of a valid IPv6 address, in lowercase hex without leading zeros. */
function ipv6Groups(address: string): string[] {
  const [text = ''] = address.toLowerCase().split('%');
  // A dotted IPv4 tail (::ffff:1.2.3.4) stands for the last two groups.
  const hex = text.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_dotted, a, b, c, d) =>
    [Number(a) * 256 + Number(b), Number(c) * 256 + Number(d)].map((group) => group.toString(16)).join(':'),
  );
  const split = (part: string) => (part ? part.split(':').map((group) => group.replace(/^0+(?=.)/, '')) : []);
  const [head = '', tail] = hex.split('::');
  if (tail === undefined) return split(head);
  const [headGroups, tailGroups] = [split(head), split(tail)];
  return [
    ...headGroups,
    ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'),
    ...tailGroups,
  ];
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

/** The URL to deliver to, or why there is none. */
function parseTarget(raw: string): URL | string {
  if (!URL.canParse(raw)) return 'the webhook URL is not a valid URL';
  const url = new URL(raw);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'a webhook URL must be http or https';
  if (url.username || url.password) return 'a webhook URL must not carry credentials';
  return url;
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

  function send(webhook: WebhookRequest): Promise<WebhookOutcome> {
    const started = performance.now();
    const latencyMs = () => Math.round(performance.now() - started);
    const failure = (reason: FailureReason, message: string): WebhookOutcome => ({
      kind: 'failure',
      reason,
      message,
      latencyMs: latencyMs(),
    });

    const url = parseTarget(webhook.url);
    if (typeof url === 'string') return Promise.resolve(failure('invalid-url', url));
    // Node connects to an IP literal without calling lookup, so the literal is checked here.
    const literal = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(literal) && !isAllowedAddress(literal, allowed)) {
      return Promise.resolve(failure('forbidden-address', `${literal} is not an allowed address`));
    }

    const secure = url.protocol === 'https:';
    const request = (secure ? httpsRequest : httpRequest)(url, {
      method: 'POST',
      agent: secure ? httpsAgent : httpAgent,
      headers: {
        ...webhook.headers,
        'User-Agent': options.userAgent,
        'Content-Length': String(Buffer.byteLength(webhook.body)),
      },
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
