/** HTML built from trusted markup and escaped values: `html` escapes every interpolation that is not already Html. */
export class Html {
  constructor(readonly text: string) {}
  toString() {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

type Part = Html | string | number | boolean | null | undefined | readonly Part[];

function render(part: Part): string {
  if (part === null || part === undefined || part === false || part === true) return '';
  if (part instanceof Html) return part.text;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(String(part));
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i += 1) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

/** Markup that is trusted as it is (built by this layer, never from input). */
export const raw = (text: string) => new Html(text);

/** JSON for a `<script type="application/json">` block: `<` is escaped so no value can close the tag. */
export const jsonData = (value: unknown) => raw(JSON.stringify(value).replace(/</g, '\\u003c'));
