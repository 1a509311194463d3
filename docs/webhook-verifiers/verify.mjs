import { createHmac, timingSafeEqual } from 'node:crypto';

const equal = (a, b) => {
  const [x, y] = [Buffer.from(a), Buffer.from(b)];
  return x.length === y.length && timingSafeEqual(x, y);
};

/**
 * Returns the event of a genuine, recent delivery; throws otherwise. body: the raw request body (a
 * Buffer or string, before any JSON parsing); headers: Node's request headers (lowercase names);
 * secret: the endpoint's whsec_… secret; now: seconds since the epoch.
 */
export function verifyWebhook(body, headers, secret, now = Date.now() / 1000) {
  const spec = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  if (!equal(spec, headers['x-svc-signature'] ?? '')) throw new Error('bad X-Svc-Signature');
  const id = headers['webhook-id'] ?? '';
  const timestamp = headers['webhook-timestamp'] ?? '';
  if (!/^\d+$/.test(timestamp) || Math.abs(now - Number(timestamp)) > 5 * 60) {
    throw new Error('webhook-timestamp too old or too new');
  }
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const mac = createHmac('sha256', key).update(`${id}.${timestamp}.`).update(body).digest('base64');
  const signatures = (headers['webhook-signature'] ?? '').split(' ');
  if (!signatures.some((signature) => equal(signature, `v1,${mac}`))) {
    throw new Error('bad webhook-signature');
  }
  return JSON.parse(body);
}
