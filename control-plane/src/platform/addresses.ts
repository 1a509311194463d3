import { isIPv6 } from 'node:net';

/**
 * The network a client's address stands for, as rate limits and lockouts count it. An IPv4 address
 * is itself; an IPv6 client usually holds a whole /64 and can take a new address from it for every
 * request, so it counts as its /64 (`2001:db8:0:1::/64`). IPv4 in IPv6 (`::ffff:192.0.2.1`) is IPv4.
 */
export function clientNetwork(address: string): string {
  if (!isIPv6(address)) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  const [head = '', tail = ''] = address.toLowerCase().split('::');
  const headGroups = head ? head.split(':') : [];
  const tailGroups = address.includes('::') ? (tail ? tail.split(':') : []) : [];
  // An embedded IPv4 tail (::1.2.3.4) lies in the interface half, which is dropped anyway.
  const missing = 8 - headGroups.length - tailGroups.length;
  const groups = address.includes('::')
    ? [...headGroups, ...Array<string>(Math.max(0, missing)).fill('0'), ...tailGroups]
    : headGroups;
  const prefix = groups.slice(0, 4).map((group) => group.replace(/^0+(?=.)/, ''));
  return `${prefix.join(':')}::/64`;
}
