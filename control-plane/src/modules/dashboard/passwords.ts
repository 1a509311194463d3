import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';

/**
 * scrypt, memory-hard: N=2^15, r=8 takes 32 MiB and ~50 ms per hash here (OWASP's minimum for
 * scrypt is N=2^17 with r=8 and p=1 or an equal cost; 2^15 with p=4 costs the same CPU-memory).
 * The parameters travel in the stored string, so they can be raised later without a migration.
 */
const PARAMS = { N: 2 ** 15, r: 8, p: 4 } as const;
const KEY_BYTES = 32;
const SALT_BYTES = 16;

function derive(
  password: string,
  salt: Buffer,
  params: { N: number; r: number; p: number },
): Promise<Buffer> {
  const options: ScryptOptions = { ...params, maxmem: 256 * params.N * params.r };
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, options, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

/** `scrypt$N$r$p$salt$hash`, base64url. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, PARAMS);
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64url'), key.toString('base64url')].join(
    '$',
  );
}

/** Compares in constant time; a malformed stored hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt = '', hash = ''] = stored.split('$');
  if (scheme !== 'scrypt') return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), {
    N: Number(n),
    r: Number(r),
    p: Number(p),
  });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

let nobody: Promise<string> | undefined;
/** Verified when nobody has the email typed, so that a wrong email takes as long as a wrong password. */
export const nobodysHash = () => {
  nobody ??= hashPassword('no such user, never matches');
  return nobody;
};
