import { createHmac, timingSafeEqual } from 'node:crypto';
import { errors } from './errors.js';

/** Where a newest-first page ended: the (created_at, id) of its last row. */
export interface Position {
  createdAt: Date;
  id: string;
}

/** Where a page in display order ended: the (position, id) of its last row. */
export interface OrderedPosition {
  position: number;
  id: string;
}

/**
 * One kind of keyset a list is ordered by: the key of a row, and how a cursor writes it as text
 * parts and reads it back. `read` is strict (the exact number of parts, each well formed), so a
 * cursor of one keyset is never read as another's: each answers null for the other's parts.
 */
interface Keyset<K, Row> {
  keyOf(row: Row): K;
  write(key: K): string[];
  read(parts: string[]): K | null;
}

/** Newest first: (created_at, id). */
const byTime: Keyset<Position, { created_at: Date; id: string }> = {
  keyOf: (row) => ({ createdAt: row.created_at, id: row.id }),
  write: (key) => [key.createdAt.toISOString(), key.id],
  read: (parts) => {
    const [at = '', id = ''] = parts;
    const createdAt = new Date(at);
    return parts.length === 2 && id && !Number.isNaN(createdAt.getTime()) ? { createdAt, id } : null;
  },
};

/** Marks a display-order cursor's payload: no timestamp starts with it. */
const ORDERED = 'o';
/** Display order: (position, id). */
const byOrder: Keyset<OrderedPosition, OrderedPosition> = {
  keyOf: (row) => ({ position: row.position, id: row.id }),
  write: (key) => [ORDERED, String(key.position), key.id],
  read: (parts) => {
    const [marker, position = '', id = ''] = parts;
    return parts.length === 3 && marker === ORDERED && /^(0|[1-9][0-9]{0,8})$/.test(position) && id
      ? { position: Number(position), id }
      : null;
  },
};

/** Enough of an HMAC-SHA256 that guessing a valid one is hopeless, short enough for a URL. */
const TAG_BYTES = 12;

/**
 * Page cursors: the position of a page's last row, opaque to clients and signed, so that a cursor
 * this API did not give out (edited, forged, from another deployment) is a 422 rather than a
 * position nobody asked for. Every replica signs with a key derived from the same secret. Lists
 * newest first use `decode` and `page`; lists in display order `decodeOrdered` and `pageOrdered`.
 */
export function createCursors(secret: string) {
  const key = createHmac('sha256', secret).update('svc page cursors v1').digest();
  const tag = (payload: string) => createHmac('sha256', key).update(payload).digest().subarray(0, TAG_BYTES);

  /** Signed cursors and pages of one keyset. */
  function pagesBy<K, Row>(keyset: Keyset<K, Row>) {
    const encode = (position: K) => {
      const payload = keyset.write(position).join('|');
      return `${Buffer.from(payload).toString('base64url')}.${tag(payload).toString('base64url')}`;
    };
    /**
     * The position a cursor stands for, undefined for no cursor (the first page); a 422 naming
     * `cursor` for anything this API did not give out.
     */
    function decode(cursor: string): K;
    function decode(cursor: string | undefined): K | undefined;
    function decode(cursor: string | undefined): K | undefined {
      if (cursor === undefined) return undefined;
      const [encoded = '', signature = ''] = cursor.split('.');
      const payload = Buffer.from(encoded, 'base64url').toString('utf8');
      const presented = Buffer.from(signature, 'base64url');
      const position =
        // Base64 decoding skips stray characters: only the exact encoding of a full tag passes.
        presented.toString('base64url') === signature &&
        presented.length === TAG_BYTES &&
        timingSafeEqual(presented, tag(payload))
          ? keyset.read(payload.split('|'))
          : null;
      if (!position) throw errors.invalidField('query', 'cursor', 'is not a cursor this API gave out');
      return position;
    }
    return {
      decode,

      /**
       * The spec's page `{items, next_cursor}` from rows fetched with `limit + 1`: the extra row only
       * tells that another page exists.
       */
      page<R extends Row, Item>(rows: readonly R[], limit: number, present: (row: R) => Item) {
        const items = rows.slice(0, limit);
        const last = items[items.length - 1];
        return {
          items: items.map(present),
          next_cursor: rows.length > limit && last !== undefined ? encode(keyset.keyOf(last)) : null,
        };
      },
    };
  }

  const newestFirst = pagesBy(byTime);
  const displayOrder = pagesBy(byOrder);
  return {
    decode: newestFirst.decode,
    page: newestFirst.page,
    decodeOrdered: displayOrder.decode,
    pageOrdered: displayOrder.page,
  };
}

export type Cursors = ReturnType<typeof createCursors>;
