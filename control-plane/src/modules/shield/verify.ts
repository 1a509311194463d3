/**
 * The integrator's side of the shield: verifies a ticket with the app's shield_secret and no call
 * back to the service. Self-contained (node:crypto only), so it can be copied into any Node server.
 *
 * A ticket is `<payload>.<signature>`: payload = base64url(JSON {a, s, c, v, e}),
 * signature = base64url(HMAC-SHA256(shield_secret, payload)).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type TicketRefusal =
  | 'malformed'
  | 'bad_signature'
  | 'other_subject'
  | 'other_scope'
  | 'expired'
  | 'not_ok';

export interface TicketPayload {
  /** The app. */
  a: string;
  /** The subject the ticket was asked for. */
  s: string;
  /** The scope. */
  c: string;
  /** The verdict: ok, suspicious, bot or block. */
  v: string;
  /** Expiry, epoch seconds. */
  e: number;
}

export function signTicketPayload(secret: string, payload: string): string {
  return createHmac('sha256', secret).update(payload).digest('base64url');
}

export function verifyShieldTicket(
  ticket: string,
  expected: { secret: string; subject: string; scope: string; nowSeconds?: number },
): { ok: true; payload: TicketPayload } | { ok: false; reason: TicketRefusal } {
  const parts = ticket.split('.');
  if (parts.length !== 2 || !parts[0] || !parts[1]) return { ok: false, reason: 'malformed' };
  const [payload, signature] = parts as [string, string];
  const wanted = Buffer.from(signTicketPayload(expected.secret, payload));
  const given = Buffer.from(signature);
  if (wanted.length !== given.length || !timingSafeEqual(wanted, given))
    return { ok: false, reason: 'bad_signature' };
  let claims: TicketPayload;
  try {
    claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as TicketPayload;
  } catch {
    return { ok: false, reason: 'malformed' };
  }
  if (claims.s !== expected.subject) return { ok: false, reason: 'other_subject' };
  if (claims.c !== expected.scope) return { ok: false, reason: 'other_scope' };
  if (!(claims.e > (expected.nowSeconds ?? Date.now() / 1000))) return { ok: false, reason: 'expired' };
  if (claims.v !== 'ok') return { ok: false, reason: 'not_ok' };
  return { ok: true, payload: claims };
}
