import { hash, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from './ids.js';

/** Secrets carry 32 base62 characters: about 190 bits, far above the 128-bit floor. */
const SECRET_LENGTH = 32;

/** One-shot: a Hash object per call showed in the profile of every keyed request (a key, a mint). */
export function sha256(text: string): Buffer {
  return hash('sha256', text, 'buffer');
}

export function newSecret(prefix: string): string {
  return `${prefix}${randomBase62(SECRET_LENGTH)}`;
}

/** Constant-time equality of two digests (or any equal-length buffers). */
export function digestsEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** What may be shown of a secret after creation: its prefix and last four characters. */
export function secretHint(secret: string): string {
  const prefixEnd = secret.lastIndexOf('_') + 1;
  return `${secret.slice(0, prefixEnd)}…${secret.slice(-4)}`;
}
