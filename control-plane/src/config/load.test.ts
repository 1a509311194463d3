import { describe, expect, it } from 'vitest';
import { ConfigError, loadSettings } from './load.js';

const valid = {
  SVC_PUBLIC_URL: 'http://127.0.0.1:8080',
  SVC_DATABASE_URL: 'postgres://svc:3b1f9c07d2e4a865@127.0.0.1:5432/svc',
  SVC_REDIS_URL: 'redis://:9e4d2c71b0a35f86@127.0.0.1:6379/0',
  SVC_EJABBERD_AUTH_SECRET: '5f0c9a1e7b3d28c4e6a0f9b1d3c57e82',
  SVC_MINIO_WEBHOOK_SECRET: '0d7e3b9a51c28f46e1a09b7c3d5f2e84',
  SVC_SHIELD_HASH_KEY: 'e2a94c17b80d36f5a1c9e07b4d28f63a',
  SVC_EJABBERD_API_SECRET: '7c1f05e93ab24d68f0e2b9a7c51d3e86',
  SVC_EJABBERD_API_URL: 'http://127.0.0.1:5281/api',
  SVC_MESSAGING_COMPONENT_URL: 'xmpp://127.0.0.1:5275',
  SVC_MESSAGING_COMPONENT_SECRET: '4a8e2c6f0b1d3e5a7c9f2b4d6e8a0c1f',
  SVC_CHAT_WS_URL: 'wss://chat.example.com/ws',
  SVC_LIVEKIT_URL: 'http://127.0.0.1:7880',
  SVC_LIVEKIT_PUBLIC_URL: 'wss://live.example.com',
  SVC_LIVEKIT_API_KEY: 'APIkey',
  SVC_LIVEKIT_API_SECRET: 'c1e8b4f09a2d7e35b6c0f1a9e4d82c7b',
  SVC_S3_ENDPOINT: 'http://127.0.0.1:9000',
  SVC_S3_PUBLIC_ENDPOINT: 'https://files.example.com',
  SVC_S3_ACCESS_KEY: 'minio',
  SVC_S3_SECRET_KEY: 'a7d3e9f1c05b28e4',
  SVC_SEALING_KEY: '8b4e1f6a93c07d25e9a1b3f0c6d84e72',
};

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadSettings(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  return [];
}

describe('loadSettings', () => {
  it('applies defaults and converts numbers', () => {
    const settings = loadSettings({ ...valid, SVC_PORT: '9090', PATH: '/usr/bin' });
    expect(settings.SVC_PORT).toBe(9090);
    expect(settings.SVC_HOST).toBe('127.0.0.1');
    expect(settings.SVC_CHAT_DOMAIN).toBe('chat.local');
    expect(settings.SVC_S3_BUCKET).toBe('svc-objects');
    expect(settings.SVC_WEBHOOK_ALLOWED_NETWORKS).toBe('');
    expect(settings.SVC_WEBHOOK_ALLOW_HTTP).toBe(false);
    expect(settings.SVC_BALANCE_LOW_USD).toBe('1');
  });

  it("reads the native stack's webhook settings", () => {
    const settings = loadSettings({
      ...valid,
      SVC_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128',
      SVC_WEBHOOK_ALLOW_HTTP: 'true',
      SVC_BALANCE_LOW_USD: '0',
    });
    expect(settings.SVC_WEBHOOK_ALLOWED_NETWORKS).toBe('127.0.0.0/8,::1/128');
    expect(settings.SVC_WEBHOOK_ALLOW_HTTP).toBe(true);
    expect(settings.SVC_BALANCE_LOW_USD).toBe('0');
    expect(problemsOf({ ...valid, SVC_BALANCE_LOW_USD: '-1' })).toEqual([
      expect.stringMatching(/^SVC_BALANCE_LOW_USD: /),
    ]);
  });

  it('names every bad setting at once', () => {
    const problems = problemsOf({
      ...valid,
      SVC_PORT: '70000',
      SVC_MINIO_WEBHOOK_SECRET: 'short',
      SVC_CHAT_WS_URL: 'not a url',
      SVC_LOG_LEVEL: 'loud',
      SVC_DATABSE_URL: 'typo',
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^SVC_PORT: /),
        expect.stringMatching(/^SVC_MINIO_WEBHOOK_SECRET: /),
        expect.stringMatching(/^SVC_CHAT_WS_URL: /),
        expect.stringMatching(/^SVC_LOG_LEVEL: /),
        'SVC_DATABSE_URL: unknown setting',
      ]),
    );
  });

  it('reads configured prices and allowances, refusing unknown metrics and bad amounts', () => {
    expect(() =>
      loadSettings({ ...valid, SVC_PRICES: 'ai.chat_calls=0.004 bandwidth.gb=0.05' }),
    ).not.toThrow();
    expect(
      problemsOf({ ...valid, SVC_PRICES: 'bandwidth.tb=1,ai.chat_calls=-2,otp.sends=0.0000001' }),
    ).toEqual([
      'SVC_PRICES: unknown metric "bandwidth.tb"',
      'SVC_PRICES: "ai.chat_calls" needs a number, 0 or more',
      'SVC_PRICES: "otp.sends" needs a number, 0 or more',
    ]);
    // Generation answers its cost in whole thousandths of a dollar (cost_milli).
    expect(problemsOf({ ...valid, SVC_PRICES: 'ai.generate_calls=0.0025' })).toEqual([
      'SVC_PRICES: "ai.generate_calls" needs a whole number of 1000 micro-dollars (its cost is answered in those units)',
    ]);
    expect(problemsOf({ ...valid, SVC_PRICES: 'ai.generate_calls=0.004' })).toEqual([]);
    expect(problemsOf({ ...valid, SVC_FREE_ALLOWANCES: 'chat.monthly_active_users=many' })).toEqual([
      'SVC_FREE_ALLOWANCES: "chat.monthly_active_users" needs a number, 0 or more',
    ]);
  });

  it('reports a missing required setting as required', () => {
    const { SVC_REDIS_URL: _omitted, ...rest } = valid;
    expect(problemsOf(rest)).toContain('SVC_REDIS_URL: required');
  });

  it('refuses placeholders and patterns as secrets, naming each setting but never the secret', () => {
    const weak = {
      SVC_EJABBERD_AUTH_SECRET: 'change-me-ejabberd-auth-secret-at-least-32-characters',
      SVC_LIVEKIT_API_SECRET: 'abababababababababababababababab',
      SVC_S3_SECRET_KEY: 'minioadmin',
      SVC_SEALING_KEY: 'change-me-sealing-key-at-least-32-characters-long',
      SVC_DATABASE_URL: 'postgres://svc:change-me-postgres-password@db:5432/svc',
      SVC_REDIS_URL: 'redis://:CHANGEME@redis:6379/0',
    };
    const problems = problemsOf({ ...valid, ...weak });
    expect(problems).toEqual([
      'SVC_EJABBERD_AUTH_SECRET: is a placeholder; generate one, e.g. openssl rand -hex 32',
      'SVC_LIVEKIT_API_SECRET: has too little randomness (a repeated pattern); generate one, e.g. openssl rand -hex 32',
      'SVC_S3_SECRET_KEY: is a placeholder; generate one, e.g. openssl rand -hex 32',
      'SVC_SEALING_KEY: is a placeholder; generate one, e.g. openssl rand -hex 32',
      'SVC_DATABASE_URL: its password is a placeholder; generate one, e.g. openssl rand -hex 32',
      'SVC_REDIS_URL: its password is a placeholder; generate one, e.g. openssl rand -hex 32',
    ]);
    for (const secret of ['change-me', 'abab', 'minioadmin', 'CHANGEME'])
      expect(problems.join('\n')).not.toContain(secret);
    // Random hex, as the examples say to generate, passes.
    expect(problemsOf(valid)).toEqual([]);
  });

  it('never puts a secret value in its message', () => {
    const secret = 'postgres-password-123';
    const problems = problemsOf({
      ...valid,
      SVC_DATABASE_URL: `nope ${secret}`,
      SVC_SHIELD_HASH_KEY: secret,
    });
    expect(problems.join('\n')).not.toContain(secret);
  });
});
