import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { newSigningSecret, signatureHeaders, signingKeys } from './signatures.js';

const body = JSON.stringify({ id: 'evt_1', type: 'ping', data: { endpoint_id: 'whe_1' } });
const at = new Date('2026-11-23T10:00:00Z');

describe('webhook signatures', () => {
  it('signs the raw body as the spec says: sha256=<hex HMAC-SHA256 keyed with the secret>', () => {
    const secret = newSigningSecret();
    const header = signatureHeaders(signingKeys(secret), 'evt_1', body, at)['x-svc-signature']!;
    const expected = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
    expect(timingSafeEqual(Buffer.from(header), Buffer.from(expected))).toBe(true);
    expect(header).toMatch(/^sha256=[0-9a-f]{64}$/);
  });

  it("passes the standardwebhooks package's verifier, and fails it for another secret or body", () => {
    const secret = newSigningSecret();
    const headers = signatureHeaders(signingKeys(secret), 'evt_1', body, new Date());
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => new Webhook(newSigningSecret()).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(`${body} `, headers)).toThrow();
  });

  it('makes secrets of 32 random bytes in the Standard Webhooks form', () => {
    const secret = newSigningSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(newSigningSecret()).not.toBe(secret);
  });
});
