import { describe, expect, it } from 'vitest';
import { clientNetwork } from './addresses.js';

describe('clientNetwork', () => {
  it('keeps an IPv4 address as it is, also when it arrives mapped into IPv6', () => {
    expect(clientNetwork('192.0.2.7')).toBe('192.0.2.7');
    expect(clientNetwork('::ffff:192.0.2.7')).toBe('192.0.2.7');
  });

  it('counts every address of an IPv6 /64 as one, however it is written', () => {
    const network = '2001:db8:0:1::/64';
    for (const address of [
      '2001:db8:0:1::1',
      '2001:0db8:0000:0001:ffff:ffff:ffff:ffff',
      '2001:DB8:0:1:abcd::',
      '2001:db8::1:0:0:0:9',
    ]) {
      expect({ address, network: clientNetwork(address) }).toEqual({ address, network });
    }
    expect(clientNetwork('2001:db8:0:2::1')).toBe('2001:db8:0:2::/64');
    expect(clientNetwork('::1')).toBe('0:0:0:0::/64');
    expect(clientNetwork('fe80::1:2:3:4')).toBe('fe80:0:0:0::/64');
  });
});
