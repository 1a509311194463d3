import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { StackError } from './errors.js';
import { writeFileAtomic } from './files.js';

/**
 * Letters and digits only: every secret is then safe unquoted in URLs, YAML, Redis config and
 * KEY=VALUE files.
 */
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** The largest multiple of the alphabet size below 256; bytes above it are dropped to avoid bias. */
const UNBIASED_LIMIT = 256 - (256 % ALPHABET.length);

export function randomToken(length: number): string {
  let token = '';
  while (token.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < UNBIASED_LIMIT && token.length < length) token += ALPHABET[byte % ALPHABET.length];
    }
  }
  return token;
}

/** How each secret is made; lengths follow what each server expects (LiveKit secrets >= 32 chars). */
const GENERATORS = {
  postgresSuperuserPassword: () => randomToken(32),
  postgresPassword: () => randomToken(32),
  redisPassword: () => randomToken(32),
  // One per caller of the control plane's internal listener, the shield's own hash key, and the key
  // that seals webhook endpoints' signing secrets.
  ejabberdAuthSecret: () => randomToken(48),
  minioWebhookSecret: () => randomToken(48),
  shieldHashKey: () => randomToken(48),
  sealingKey: () => randomToken(48),
  // The HTTP API accounts of ejabberd (ejabberd/ejabberd_auth_svc_api.erl).
  ejabberdApiSecret: () => randomToken(48),
  ejabberdOperatorSecret: () => randomToken(48),
  // The Erlang cookie the nodes of an ejabberd cluster share (and the node that joins them).
  ejabberdCookie: () => randomToken(40),
  // The control plane's external component (XEP-0114) authenticates to ejabberd with it.
  ejabberdComponentSecret: () => randomToken(48),
  livekitApiKey: () => `API${randomToken(12)}`,
  aiApiKey: () => randomToken(48),
  livekitApiSecret: () => randomToken(48),
  minioRootUser: () => randomToken(20),
  minioRootPassword: () => randomToken(40),
} satisfies Record<string, () => string>;

export type StackSecrets = Readonly<Record<keyof typeof GENERATORS, string>>;

function readSecretsFile(file: string): Record<string, unknown> {
  if (!existsSync(file)) return {};
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    throw new StackError(`${file} is not valid JSON (${(error as Error).message}); fix or delete it`);
  }
}

/**
 * A profile's secrets: generated once, then read back on every run, because the data dirs keep
 * the passwords they were created with. A secret added in a later version is generated and saved
 * without changing the existing ones.
 */
export function ensureSecrets(file: string): StackSecrets {
  const stored = readSecretsFile(file);
  const secrets: Record<string, string> = {};
  let changed = false;
  for (const [name, generate] of Object.entries(GENERATORS)) {
    const value = stored[name];
    if (typeof value === 'string' && value !== '') secrets[name] = value;
    else {
      secrets[name] = generate();
      changed = true;
    }
  }
  if (changed) writeFileAtomic(file, `${JSON.stringify({ ...stored, ...secrets }, null, 2)}\n`);
  return secrets as StackSecrets;
}
