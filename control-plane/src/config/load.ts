import { FormatRegistry } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { Value } from '@sinclair/typebox/value';
import { parseConfiguredPricing } from '../platform/prices.js';
import { type Settings, SettingsSchema } from './schema.js';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

if (!FormatRegistry.Has('uri')) FormatRegistry.Set('uri', (value) => URL.canParse(value));
const checker = TypeCompiler.Compile(SettingsSchema);

/**
 * Reads the settings once from an environment map. Unknown SVC_* names and every bad value are
 * reported together, each naming its setting, so an operator fixes them in one pass.
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
  if (problems.length > 0) throw new ConfigError([...new Set(problems)]);
  return candidate as Settings;
}
