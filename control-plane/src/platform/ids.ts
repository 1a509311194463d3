import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** The largest multiple of 62 that fits a byte: bytes from here up are drawn again, so none is favoured. */
const UNBIASED_BELOW = 248;

/** Random base62 text: unbiased (out-of-range bytes are rejected), copy-paste safe. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length + 8)) {
      if (byte < UNBIASED_BELOW) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** A record id such as `acct_3Fq…`: a type prefix and 20 base62 characters (~119 bits). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(20)}`;
}
