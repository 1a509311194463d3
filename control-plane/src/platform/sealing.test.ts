import { describe, expect, it } from 'vitest';
import { createSealer } from './sealing.js';

describe('sealing', () => {
  const sealer = createSealer('an operator secret of enough length 0123456789');

  it('opens what it sealed for the same owner, and each seal differs', () => {
    const once = sealer.seal('whsec_abc', 'whe_1');
    expect(sealer.open(once, 'whe_1')).toBe('whsec_abc');
    expect(sealer.seal('whsec_abc', 'whe_1').equals(once)).toBe(false);
  });

  it('refuses another owner, another key and altered bytes', () => {
    const sealed = sealer.seal('whsec_abc', 'whe_1');
    expect(() => sealer.open(sealed, 'whe_2')).toThrow();
    expect(() => createSealer('another operator secret 0123456789abcdef').open(sealed, 'whe_1')).toThrow();
    const altered = Buffer.from(sealed);
    altered[altered.length - 1]! ^= 1;
    expect(() => sealer.open(altered, 'whe_1')).toThrow();
    // Cut short, so that a shorter tag would be read: refused.
    expect(() => sealer.open(sealed.subarray(0, sealed.length - 4), 'whe_1')).toThrow();
    expect(() => sealer.open(sealed.subarray(0, 20), 'whe_1')).toThrow();
  });
});
