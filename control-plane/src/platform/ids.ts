import { randomFillSync } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** The largest multiple of 62 that fits a byte: bytes from here up are drawn again, so none is favoured. */
const UNBIASED_BELOW = 248;

/**
 * Random bytes drawn 4 KiB at a time and handed out once each: a draw from the system's generator
 * per id cost more than the rest of a priced call's CPU in the control plane put together.
 */
const pool = Buffer.alloc(4096);
let next = pool.length;

function randomByte(): number {
  if (next === pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  return pool[next++]!;
}

/** Random base62 text: unbiased (out-of-range bytes are rejected), copy-paste safe. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < UNBIASED_BELOW) out += BASE62[byte % 62];
  }
  return out;
}

/** A record id such as `acct_3Fq…`: a type prefix and 20 base62 characters (~119 bits). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(20)}`;
}
