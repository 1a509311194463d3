import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SettingsSchema } from './schema.js';

describe('the README configuration table', () => {
  const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
  const rows = new Map(
    [...readme.matchAll(/^\| `(SVC_[A-Z0-9_]+)`\s*\| ([^|]+?)\s*\|/gm)].map((match) => [
      match[1],
      match[2]!.trim(),
    ]),
  );

  it('lists every setting with its default, and nothing else', () => {
    const settings = Object.entries(SettingsSchema.properties);
    expect([...rows.keys()].sort()).toEqual(settings.map(([name]) => name).sort());
    for (const [name, schema] of settings) {
      const fallback = (schema as { default?: unknown }).default;
      const shown = fallback === undefined ? 'required' : fallback === '' ? '(empty)' : `\`${fallback}\``;
      expect(rows.get(name), name).toBe(shown);
    }
  });
});
