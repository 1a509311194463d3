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

describe('page cursors in display order', () => {
  const cursors = createCursors('one deployment’s secret');
  const ordered = [
    { id: 'x', position: 0 },
    { id: 'y', position: 1 },
    { id: 'z', position: 10 },
  ];

  it('give the (position, id) of the last row when another page exists, and read it back', () => {
    const page = cursors.pageOrdered(ordered, 2, (row) => row.id);
    expect(page.items).toEqual(['x', 'y']);
    expect(cursors.decodeOrdered(page.next_cursor!)).toEqual({ position: 1, id: 'y' });
    expect(cursors.decodeOrdered(cursors.pageOrdered(ordered, 1, (row) => row.id).next_cursor!)).toEqual({
      position: 0,
      id: 'x',
    });
    expect(cursors.pageOrdered(ordered, 3, (row) => row.id)).toEqual({
      items: ['x', 'y', 'z'],
      next_cursor: null,
    });
    expect(cursors.pageOrdered([], 20, (row) => row)).toEqual({ items: [], next_cursor: null });
  });

  it('are never taken for a newest-first cursor, nor one for them, though both are signed alike', () => {
    const byOrder = cursors.pageOrdered(ordered, 1, (row) => row.id).next_cursor!;
    const byTime = cursors.page(rows, 1, (row) => row.id).next_cursor!;
    expect(() => cursors.decode(byOrder)).toThrow(/cursor is not a cursor this API gave out/);
    expect(() => cursors.decodeOrdered(byTime)).toThrow(/cursor is not a cursor this API gave out/);
  });

  it('refuse a cursor that was edited, forged or signed by another deployment', () => {
    const cursor = cursors.pageOrdered(ordered, 1, (row) => row.id).next_cursor!;
    const [payload, tag] = cursor.split('.');
    const text = Buffer.from(payload!, 'base64url').toString();
    expect(text).toBe('o|0|x');
    const forged = (edited: string) => `${Buffer.from(edited).toString('base64url')}.${tag}`;
    const elsewhere = createCursors('another secret').pageOrdered(ordered, 1, (row) => row.id).next_cursor!;
    for (const bad of [
      forged('o|5|x'),
      forged('o|0|y'),
      payload!,
      elsewhere,
      'garbage',
      `${payload}.${tag}x`,
    ]) {
      expect(() => cursors.decodeOrdered(bad), bad).toThrow(/cursor is not a cursor this API gave out/);
    }
  });

  it('read back only well-formed positions, even when correctly signed', () => {
    // Rows no list holds, signed by this deployment: reading is strict all the same.
    const cursorAfter = (position: number) =>
      cursors.pageOrdered(
        [
          { id: 'a', position },
          { id: 'b', position: position + 1 },
        ],
        1,
        (row) => row.id,
      ).next_cursor!;
    expect(cursors.decodeOrdered(cursorAfter(123))).toEqual({ position: 123, id: 'a' });
    for (const position of [-1, 1.5, 1e10]) {
      expect(() => cursors.decodeOrdered(cursorAfter(position)), String(position)).toThrow(
        /cursor is not a cursor this API gave out/,
      );
    }
  });
});
