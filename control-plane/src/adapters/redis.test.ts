import { describe, expect, it } from 'vitest';
import { requireRedisVersion } from './redis.js';

const info = (version: string) => `# Server\r\nredis_version:${version}\r\nredis_mode:standalone\r\n`;

describe('requireRedisVersion', () => {
  it('accepts Redis 7 and later, and answers the version', () => {
    expect(requireRedisVersion(info('7.0.15'))).toBe('7.0.15');
    expect(requireRedisVersion(info('8.2.1'))).toBe('8.2.1');
  });

  it('refuses Redis 6, whose EXPIRE has no NX, naming the version found', () => {
    expect(() => requireRedisVersion(info('6.2.14'))).toThrow(/Redis 6\.2\.14 is too old.*Redis 7 or later/);
  });

  it('refuses an answer without a version', () => {
    expect(() => requireRedisVersion('# Server\r\nredis_mode:standalone\r\n')).toThrow(/version/);
  });
});
