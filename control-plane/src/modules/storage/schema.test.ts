import { describe, expect, it } from 'vitest';
import { looksLikeActiveDocument } from './schema.js';

const active = (text: string) => looksLikeActiveDocument(Buffer.from(text));

describe('looksLikeActiveDocument', () => {
  it('finds HTML and SVG after a BOM, white space, an XML prolog and comments', () => {
    expect(active('\uFEFF  <!DOCTYPE html><p>')).toBe(true);
    expect(active('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg">')).toBe(true);
    expect(active('<!-- a -->\n<!---->  <SCRIPT>alert(1)</script>')).toBe(true);
    expect(active('<?xml version="1.0"?><!-- made by hand --><html>')).toBe(true);
    expect(active('<iframe src=x>')).toBe(true);
    // Comments end where a browser ends them: empty ones at once, and at --!> too.
    expect(active('<!--><script>alert(1)</script>')).toBe(true);
    expect(active('<!---><html>')).toBe(true);
    expect(active('<!-- a --!><svg>')).toBe(true);
  });

  it('passes what a browser would not take for a document', () => {
    expect(active('hello <html>')).toBe(false);
    expect(active('<!-- never closed <html>')).toBe(false);
    // A comment ends at its first -->, as a browser reads it.
    expect(active('<!-- a --> text --> <html>')).toBe(false);
    expect(active('<htmlish>')).toBe(false);
    expect(active('{"html": true}')).toBe(false);
  });

  it('reads many comments in one pass (a repeated lazy comment in a regex backtracked exponentially)', () => {
    expect(active(`${'<!---->'.repeat(73)}x`)).toBe(false);
    expect(active(`${'<!---->'.repeat(73)}<svg>`)).toBe(true);
  });
});
