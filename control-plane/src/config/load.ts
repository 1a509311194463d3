import { FormatRegistry } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import { parseConfiguredPricing } from '../platform/prices.js';
import { SECRET_SETTINGS, type Settings, SettingsSchema } from './schema.js';

/** The entries of a comma-separated value, trimmed, empty ones left out. */
export const commaSeparated = (text: string) =>
  text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

if (!FormatRegistry.Has('uri')) FormatRegistry.Set('uri', (value) => URL.canParse(value));
const checker = TypeCompiler.Compile(SettingsSchema);

/** The settings that are secrets, and the URLs whose password is one. */
const URLS_WITH_PASSWORDS: readonly (keyof Settings)[] = ['SVC_DATABASE_URL', 'SVC_REDIS_URL'];
const SECRETS = [...SECRET_SETTINGS].filter((name) => !URLS_WITH_PASSWORDS.includes(name));

/** Words of example files and well-known development defaults (LiveKit's dev secret, MinIO's). */
const PLACEHOLDER = /change-?me|placeholder|example|your[-_]?secret|^(secret|password|devkey|minioadmin)$/i;
/** Fewer different characters than this in a secret of 16 or more is a pattern, not randomness. */
const MIN_DISTINCT_CHARACTERS = 10;

/** Why a secret must not be used, or nothing; never the secret itself. */
function weakness(secret: string): string | undefined {
  if (PLACEHOLDER.test(secret)) return 'is a placeholder; generate one, e.g. openssl rand -hex 32';
  if (secret.length >= 16 && new Set(secret).size < MIN_DISTINCT_CHARACTERS)
    return 'has too little randomness (a repeated pattern); generate one, e.g. openssl rand -hex 32';
  return undefined;
}

function weakSecrets(settings: Partial<Settings>): string[] {
  const problems: string[] = [];
  for (const name of SECRETS) {
    const why = typeof settings[name] === 'string' ? weakness(settings[name]) : undefined;
    if (why) problems.push(`${name}: ${why}`);
  }
  for (const name of URLS_WITH_PASSWORDS) {
    const url = settings[name];
    const password = typeof url === 'string' && URL.canParse(url) ? new URL(url).password : '';
    const why = password ? weakness(decodeURIComponent(password)) : undefined;
    if (why) problems.push(`${name}: its password ${why}`);
  }
  return problems;
}

/**
 * Reads the settings once from an environment map. Unknown SVC_* names and every bad value are
 * reported together, each naming its setting, so an operator fixes them in one pass. Secrets that are
 * placeholders or patterns are bad values: LiveKit's, for one, would let anyone forge tokens.
 */
export function loadSettings(env: NodeJS.ProcessEnv): Settings {
  const known = new Set(Object.keys(SettingsSchema.properties));
  const problems: string[] = [];
  const raw: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith('SVC_') || value === undefined || value === '') continue;
    if (known.has(name)) raw[name] = value;
    // SVC_STACK_* belongs to the stack runner (e.g. SVC_STACK_PORT_BASE), not to the control plane.
    else if (!name.startsWith('SVC_STACK_')) problems.push(`${name}: unknown setting`);
  }
  const candidate = Value.Convert(SettingsSchema, Value.Default(SettingsSchema, raw)) as Partial<Settings>;
  for (const error of checker.Errors(candidate)) {
    const name = error.path.replace(/^\//, '') || '(settings)';
    problems.push(raw[name] === undefined ? `${name}: required` : `${name}: ${error.message}`);
  }
  if (typeof candidate.SVC_PRICES === 'string' && typeof candidate.SVC_FREE_ALLOWANCES === 'string') {
    problems.push(...parseConfiguredPricing(candidate.SVC_PRICES, candidate.SVC_FREE_ALLOWANCES).problems);
  }
  problems.push(...weakSecrets(candidate));
  if (problems.length > 0) throw new ConfigError([...new Set(problems)]);
  return candidate as Settings;
}
