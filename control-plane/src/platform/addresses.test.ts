import { describe, expect, it } from 'vitest';
import { allowList, clientNetwork, isAllowedAddress } from './addresses.js';

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

const none = allowList([]);

describe('isAllowedAddress', () => {
  it.each([
    '169.254.169.254',
    '10.1.2.3',
    '172.20.0.1',
    '192.168.1.1',
    '100.64.0.1',
    '127.0.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '198.18.0.1',
    '::',
    '::1',
    'fe80::1',
    'fe80::1%eth0',
    'fd00:ec2::254',
    'ff02::1',
    '2001:db8::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '0:0:0:0:0:FFFF:A9FE:A9FE',
    '64:ff9b::a00:1',
    '64:ff9b::127.0.0.1',
    '64:ff9b:1::808:808',
    '::127.0.0.1',
    '2002:a00:1::1',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2',
  ])('refuses %s', (address) => {
    expect(isAllowedAddress(address, none)).toBe(false);
  });

  it.each(['8.8.8.8', '93.184.216.34', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808'])(
    'allows %s',
    (address) => {
      expect(isAllowedAddress(address, none)).toBe(true);
    },
  );

  it.each(['', 'localhost', '1.2.3', '8.8.8.8/32', '[::1]'])('refuses what is not an address: %j', (text) => {
    expect(isAllowedAddress(text, none)).toBe(false);
  });

  it('allows what the operator allow-lists, also when it arrives as IPv4 in IPv6', () => {
    const allowed = allowList(['10.0.0.0/8', 'fd00:ec2::/32']);
    expect(isAllowedAddress('10.1.2.3', allowed)).toBe(true);
    expect(isAllowedAddress('::ffff:10.1.2.3', allowed)).toBe(true);
    expect(isAllowedAddress('64:ff9b::a01:203', allowed)).toBe(true);
    expect(isAllowedAddress('fd00:ec2::254', allowed)).toBe(true);
    expect(isAllowedAddress('11.0.0.1', allowed)).toBe(true);
    expect(isAllowedAddress('172.16.0.1', allowed)).toBe(false);
    expect(isAllowedAddress('fd00::1', allowed)).toBe(false);
  });
});

describe('allowList', () => {
  it.each([
    '10.0.0.0',
    '10.0.0/8',
    '10.0.0.0/33',
    '::1/129',
    '10.0.0.0/8/8',
    '10.0.0.0/-1',
    'x/8',
    '10.0.0.0/ 8',
  ])('throws on %j, naming it', (cidr) => {
    expect(() => allowList(['127.0.0.0/8', cidr])).toThrow(`"${cidr}" is not a network in CIDR notation`);
  });
});
