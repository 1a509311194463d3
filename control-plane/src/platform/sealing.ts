import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals secrets the service must use again but never show (webhook signing secrets): AES-256-GCM
 * under a key derived from an operator secret, with what the secret belongs to as associated data,
 * so a sealed value copied onto another row does not open. Stored as iv | tag | ciphertext.
 */
export function createSealer(keySecret: string) {
  const key = createHash('sha256').update(`svc-sealing-v1:${keySecret}`, 'utf8').digest();
  return {
    seal(plain: string, owner: string): Buffer {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      cipher.setAAD(Buffer.from(owner, 'utf8'));
      const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), sealed]);
    },
    /** Throws when the value was sealed under another key or for another owner, or was altered. */
    open(sealed: Uint8Array, owner: string): string {
      const bytes = Buffer.from(sealed);
      if (bytes.length < IV_BYTES + TAG_BYTES) throw new Error('not a sealed value');
      // The tag's full length, so that a value cut short never opens with a shorter tag.
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES), {
        authTagLength: TAG_BYTES,
      });
      decipher.setAAD(Buffer.from(owner, 'utf8'));
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([
        decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)),
        decipher.final(),
      ]).toString('utf8');
    },
  };
}

export type Sealer = ReturnType<typeof createSealer>;
