import { readFileSync } from 'node:fs';

const PLACEHOLDER = /\{\{\s*([a-z_]+)\s*\}\}/g;

/**
 * Fills {{name}} placeholders. A placeholder without a value, or a value without a placeholder, is
 * an error: either one means the template and its server module have drifted apart.
 */
export function renderTemplate(template: string, values: Readonly<Record<string, string | number>>): string {
  const used = new Set<string>();
  const missing = new Set<string>();
  const rendered = template.replace(PLACEHOLDER, (placeholder, name: string) => {
    const value = values[name];
    if (value === undefined) {
      missing.add(name);
      return placeholder;
    }
    used.add(name);
    return String(value);
  });
  const unused = Object.keys(values).filter((name) => !used.has(name));
  if (missing.size > 0 || unused.length > 0)
    throw new Error(
      `template does not match its values: missing ${[...missing].join(', ') || 'none'}; unused ${unused.join(', ') || 'none'}`,
    );
  return rendered;
}

export function renderTemplateFile(path: string, values: Readonly<Record<string, string | number>>): string {
  try {
    return renderTemplate(readFileSync(path, 'utf8'), values);
  } catch (error) {
    throw new Error(`${path}: ${(error as Error).message}`);
  }
}
