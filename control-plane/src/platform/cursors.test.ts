import { describe, expect, it } from 'vitest';
import { createCursors } from './cursors.js';

const rows = [
  { id: 'a', created_at: new Date('2026-01-03T00:00:00Z') },
  { id: 'b', created_at: new Date('2026-01-02T00:00:00Z') },
  { id: 'c', created_at: new Date('2026-01-01T00:00:00Z') },
];

describe('page cursors', () => {
  const cursors = createCursors('one deployment’s secret');

  it('gives the position of the last row when another page exists, and reads it back', () => {
    const page = cursors.page(rows, 2, (row) => row.id);
    expect(page.items).toEqual(['a', 'b']);
    expect(cursors.decode(page.next_cursor!)).toEqual({ id: 'b', createdAt: rows[1]!.created_at });
    expect(cursors.page(rows, 3, (row) => row.id).next_cursor).toBeNull();
  });

  it('refuses a cursor that was edited, forged or signed by another deployment', () => {
    const cursor = cursors.page(rows, 1, (row) => row.id).next_cursor!;
    const [payload, tag] = cursor.split('.');
    const edited = Buffer.from(Buffer.from(payload!, 'base64url').toString().replace('|a', '|z')).toString(
      'base64url',
    );
    const elsewhere = createCursors('another secret').page(rows, 1, (row) => row.id).next_cursor!;
    for (const bad of [`${edited}.${tag}`, payload!, elsewhere, 'garbage', `${payload}.${tag}x`]) {
      expect(() => cursors.decode(bad), bad).toThrow(/cursor is not a cursor this API gave out/);
    }
  });
});
