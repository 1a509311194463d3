import { describe, expect, it } from 'vitest';
import { ConfigError, loadSettings } from './load.js';

const valid = {
  SVC_PUBLIC_URL: 'http://127.0.0.1:8080',
  SVC_DATABASE_URL: 'postgres://svc:pw@127.0.0.1:5432/svc',
  SVC_REDIS_URL: 'redis://:pw@127.0.0.1:6379/0',
  SVC_INTERNAL_SECRET: 'i'.repeat(32),
  SVC_EJABBERD_API_URL: 'http://127.0.0.1:5281/api',
  SVC_CHAT_WS_URL: 'wss://chat.example.com/ws',
  SVC_LIVEKIT_URL: 'http://127.0.0.1:7880',
  SVC_LIVEKIT_PUBLIC_URL: 'wss://live.example.com',
  SVC_LIVEKIT_API_KEY: 'APIkey',
  SVC_LIVEKIT_API_SECRET: 's'.repeat(32),
  SVC_S3_ENDPOINT: 'http://127.0.0.1:9000',
  SVC_S3_PUBLIC_ENDPOINT: 'https://files.example.com',
  SVC_S3_ACCESS_KEY: 'minio',
  SVC_S3_SECRET_KEY: 'minio-secret',
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
  });

  it('names every bad setting at once', () => {
    const problems = problemsOf({
      ...valid,
      SVC_PORT: '70000',
      SVC_INTERNAL_SECRET: 'short',
      SVC_CHAT_WS_URL: 'not a url',
      SVC_LOG_LEVEL: 'loud',
      SVC_DATABSE_URL: 'typo',
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^SVC_PORT: /),
        expect.stringMatching(/^SVC_INTERNAL_SECRET: /),
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
    expect(problemsOf({ ...valid, SVC_FREE_ALLOWANCES: 'chat.monthly_active_users=many' })).toEqual([
      'SVC_FREE_ALLOWANCES: "chat.monthly_active_users" needs a number, 0 or more',
    ]);
  });

  it('reports a missing required setting as required', () => {
    const { SVC_REDIS_URL: _omitted, ...rest } = valid;
    expect(problemsOf(rest)).toContain('SVC_REDIS_URL: required');
  });

  it('never puts a secret value in its message', () => {
    const secret = 'postgres-password-123';
    const problems = problemsOf({
      ...valid,
      SVC_DATABASE_URL: `nope ${secret}`,
      SVC_INTERNAL_SECRET: secret,
    });
    expect(problems.join('\n')).not.toContain(secret);
  });
});
