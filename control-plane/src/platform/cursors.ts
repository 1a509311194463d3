import { errors } from './errors.js';

/** Where a newest-first page ended: the (created_at, id) of its last row. */
export interface Position {
  createdAt: Date;
  id: string;
}

/** The `next_cursor` after a row: opaque to clients, read back by `decodeCursor`. */
export const encodeCursor = (createdAt: Date, id: string) =>
  Buffer.from(`${createdAt.toISOString()}|${id}`).toString('base64url');

/** The position a cursor stands for; a 422 naming `cursor` for anything this API did not give out. */
export function decodeCursor(cursor: string): Position {
  const [at = '', id = ''] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const createdAt = new Date(at);
  if (Number.isNaN(createdAt.getTime()) || !id) {
    throw errors.invalidField('query', 'cursor', 'is not a cursor this API gave out');
  }
  return { createdAt, id };
}

/**
 * The spec's page `{items, next_cursor}` from rows fetched with `limit + 1`: the extra row only tells
 * that another page exists.
 */
export function pageOf<Row extends { created_at: Date; id: string }, Item>(
  rows: readonly Row[],
  limit: number,
  present: (row: Row) => Item,
) {
  const items = rows.slice(0, limit);
  const last = items[items.length - 1];
  return {
    items: items.map(present),
    next_cursor: rows.length > limit && last ? encodeCursor(last.created_at, last.id) : null,
  };
}
