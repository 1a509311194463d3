import { createHmac, randomBytes } from 'node:crypto';

/** Standard Webhooks' secret form: whsec_ and the base64 of the key bytes. */
const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;

export function newSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/**
 * The headers that sign one attempt, both schemes from the one secret:
 * - the spec's `X-Svc-Signature: sha256=<hex HMAC-SHA256 of the raw body>`, keyed with the secret
 *   exactly as shown (its UTF-8 bytes, prefix included);
 * - Standard Webhooks' `webhook-id` (the event id), `webhook-timestamp` (seconds) and
 *   `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed with the base64-decoded
 *   part after whsec_, so receivers can refuse replays with an off-the-shelf verifier.
 */
export function signatureHeaders(
  secret: string,
  eventId: string,
  body: string,
  at: Date,
): Record<string, string> {
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const spec = createHmac('sha256', Buffer.from(secret, 'utf8')).update(body, 'utf8').digest('hex');
  const standardKey = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  const standard = createHmac('sha256', standardKey)
    .update(`${eventId}.${timestamp}.${body}`, 'utf8')
    .digest('base64');
  return {
    'x-svc-signature': `sha256=${spec}`,
    'webhook-id': eventId,
    'webhook-timestamp': timestamp,
    'webhook-signature': `v1,${standard}`,
  };
}
