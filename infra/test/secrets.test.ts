import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ensureSecrets, randomToken } from '../src/secrets.js';

const dirs: string[] = [];
function secretsFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'stack-secrets-'));
  dirs.push(dir);
  return join(dir, 'secrets.json');
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('secrets', () => {
  it('are generated once and read back unchanged on later runs', () => {
    const file = secretsFile();
    const first = ensureSecrets(file);
    const written = readFileSync(file, 'utf8');
    expect(ensureSecrets(file)).toEqual(first);
    expect(readFileSync(file, 'utf8')).toBe(written);
  });

  it('are readable by the owner only', () => {
    const file = secretsFile();
    ensureSecrets(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('differ between profiles', () => {
    expect(ensureSecrets(secretsFile()).ejabberdAuthSecret).not.toBe(
      ensureSecrets(secretsFile()).ejabberdAuthSecret,
    );
  });

  it('meet the servers length rules and are safe in URLs and YAML', () => {
    const secrets = ensureSecrets(secretsFile());
    // The control plane's settings ask 32 characters of each (SVC_*_SECRET, SVC_SHIELD_HASH_KEY,
    // SVC_SEALING_KEY).
    for (const name of [
      'ejabberdAuthSecret',
      'minioWebhookSecret',
      'shieldHashKey',
      'sealingKey',
      'ejabberdApiSecret',
      'ejabberdOperatorSecret',
      'ejabberdComponentSecret',
    ] as const)
      expect(secrets[name].length).toBeGreaterThanOrEqual(32);
    expect(secrets.livekitApiSecret.length).toBeGreaterThanOrEqual(32);
    expect(secrets.minioRootPassword.length).toBeGreaterThanOrEqual(8);
    for (const value of Object.values(secrets)) expect(value).toMatch(/^[A-Za-z0-9]+$/);
  });

  it('adds a secret missing from an older file without changing the others', () => {
    const file = secretsFile();
    const { redisPassword, sealingKey, ...older } = ensureSecrets(file);
    writeFileSync(file, JSON.stringify(older));
    const upgraded = ensureSecrets(file);
    expect(upgraded).toMatchObject(older);
    expect(upgraded.redisPassword).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(upgraded.redisPassword).not.toBe(redisPassword);
    expect(upgraded.sealingKey).toMatch(/^[A-Za-z0-9]{48}$/);
    expect(upgraded.sealingKey).not.toBe(sealingKey);
    // Saved, so the next run reads the same ones back.
    expect(ensureSecrets(file)).toEqual(upgraded);
  });

  it('refuses a corrupt file instead of replacing the passwords the data dirs were made with', () => {
    const file = secretsFile();
    writeFileSync(file, '{"postgresPassword": ');
    expect(() => ensureSecrets(file)).toThrow(/not valid JSON/);
  });
});

describe('randomToken', () => {
  it('has the requested length and uses letters and digits only', () => {
    const token = randomToken(500);
    expect(token).toHaveLength(500);
    expect(token).toMatch(/^[A-Za-z0-9]+$/);
  });
});
