import { createHmac, timingSafeEqual } from 'node:crypto';
import { errors } from './errors.js';

/** Where a newest-first page ended: the (created_at, id) of its last row. */
export interface Position {
  createdAt: Date;
  id: string;
}

/** Enough of an HMAC-SHA256 that guessing a valid one is hopeless, short enough for a URL. */
const TAG_BYTES = 12;

/**
 * Page cursors: the position of a page's last row, opaque to clients and signed, so that a cursor
 * this API did not give out (edited, forged, from another deployment) is a 422 rather than a
 * position nobody asked for. Every replica signs with a key derived from the same secret.
 */
export function createCursors(secret: string) {
  const key = createHmac('sha256', secret).update('svc page cursors v1').digest();
  const tag = (payload: string) => createHmac('sha256', key).update(payload).digest().subarray(0, TAG_BYTES);

  const encode = (createdAt: Date, id: string) => {
    const payload = `${createdAt.toISOString()}|${id}`;
    return `${Buffer.from(payload).toString('base64url')}.${tag(payload).toString('base64url')}`;
  };

  return {
    /** The position a cursor stands for; a 422 naming `cursor` for anything this API did not give out. */
    decode(cursor: string): Position {
      const [encoded = '', signature = ''] = cursor.split('.');
      const payload = Buffer.from(encoded, 'base64url').toString('utf8');
      const presented = Buffer.from(signature, 'base64url');
      const [at = '', id = ''] = payload.split('|');
      const createdAt = new Date(at);
      if (
        // Base64 decoding skips stray characters: only the exact encoding of a full tag passes.
        presented.toString('base64url') !== signature ||
        presented.length !== TAG_BYTES ||
        !timingSafeEqual(presented, tag(payload)) ||
        Number.isNaN(createdAt.getTime()) ||
        !id
      ) {
        throw errors.invalidField('query', 'cursor', 'is not a cursor this API gave out');
      }
      return { createdAt, id };
    },

    /**
     * The spec's page `{items, next_cursor}` from rows fetched with `limit + 1`: the extra row only
     * tells that another page exists.
     */
    page<Row extends { created_at: Date; id: string }, Item>(
      rows: readonly Row[],
      limit: number,
      present: (row: Row) => Item,
    ) {
      const items = rows.slice(0, limit);
      const last = items[items.length - 1];
      return {
        items: items.map(present),
        next_cursor: rows.length > limit && last ? encode(last.created_at, last.id) : null,
      };
    },
  };
}

export type Cursors = ReturnType<typeof createCursors>;
