import { BlockList, isIP, isIPv6 } from 'node:net';

/**
 * The network a client's address stands for, as rate limits and lockouts count it. An IPv4 address
 * is itself; an IPv6 client usually holds a whole /64 and can take a new address from it for every
 * request, so it counts as its /64 (`2001:db8:0:1::/64`). IPv4 in IPv6 (`::ffff:192.0.2.1`) is IPv4.
 */
export function clientNetwork(address: string): string {
  // Every IPv6 address has a colon: IPv4 clients skip isIPv6's long pattern (5 µs of each request).
  if (!address.includes(':') || !isIPv6(address)) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  // An embedded IPv4 tail (::1.2.3.4) lies in the interface half, which is dropped anyway.
  return `${ipv6Groups(address).slice(0, 4).join(':')}::/64`;
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
