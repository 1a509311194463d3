import { describe, expect, it } from 'vitest';
import { digestsEqual, newSecret, secretHint, sha256 } from './secrets.js';

describe('secrets', () => {
  it('are the prefix and 32 base62 characters, never twice the same', () => {
    const secrets = new Set(Array.from({ length: 1_000 }, () => newSecret('svc_test_')));
    expect(secrets.size).toBe(1_000);
    for (const secret of secrets) expect(secret).toMatch(/^svc_test_[0-9A-Za-z]{32}$/);
  });

  it('are shown after creation only as a hint', () => {
    expect(secretHint('svc_live_abcdefghijklmnopqrstuvwxyz012345')).toBe('svc_live_…2345');
  });

  it('compare by digest in constant time', () => {
    expect(digestsEqual(sha256('a'), sha256('a'))).toBe(true);
    expect(digestsEqual(sha256('a'), sha256('b'))).toBe(false);
    expect(digestsEqual(sha256('a'), Buffer.alloc(3))).toBe(false);
  });
});
