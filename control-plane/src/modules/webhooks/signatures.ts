import { createHmac, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';

/** Standard Webhooks' secret form: whsec_ and the base64 of the key bytes. */
const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;

export function newSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** One endpoint secret's HMAC keys, made once: importing a key costs as much as the HMAC it keys. */
export interface SigningKeys {
  spec: KeyObject;
  standard: KeyObject;
}

/**
 * The keys of both schemes from the one secret:
 * - the spec's, keyed with the secret exactly as shown (its UTF-8 bytes, prefix included);
 * - Standard Webhooks', keyed with the base64-decoded part after whsec_.
 */
export function signingKeys(secret: string): SigningKeys {
  return {
    spec: createSecretKey(Buffer.from(secret, 'utf8')),
    standard: createSecretKey(Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64')),
  };
}

/**
 * The headers that sign one attempt, both schemes with the one secret's keys (`signingKeys`):
 * - the spec's `X-Svc-Signature: sha256=<hex HMAC-SHA256 of the raw body>`;
 * - Standard Webhooks' `webhook-id` (the event id), `webhook-timestamp` (seconds) and
 *   `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, so receivers can refuse
 *   replays with an off-the-shelf verifier.
 */
export function signatureHeaders(
  keys: SigningKeys,
  eventId: string,
  body: string,
  at: Date,
): Record<string, string> {
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const spec = createHmac('sha256', keys.spec).update(body, 'utf8').digest('hex');
  const standard = createHmac('sha256', keys.standard)
    .update(`${eventId}.${timestamp}.${body}`, 'utf8')
    .digest('base64');
  return {
    'x-svc-signature': `sha256=${spec}`,
    'webhook-id': eventId,
    'webhook-timestamp': timestamp,
    'webhook-signature': `v1,${standard}`,
  };
}
