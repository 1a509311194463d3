import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export const SESSION_COOKIE = 'svc_dash_session';
/** Before sign-in, the sign-in and invitation forms are tied to this cookie instead of a session. */
export const PRE_SESSION_COOKIE = 'svc_dash_pre';
export const CSRF_FIELD = '_csrf';

export function readCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at <= 0) continue;
    try {
      cookies.set(part.slice(0, at).trim(), decodeURIComponent(part.slice(at + 1).trim()));
    } catch {
      // Another application's cookie on the same host, badly encoded: not ours, skipped.
    }
  }
  return cookies;
}

/**
 * HTTP-only (no script reads it), SameSite=Strict (no other site's page sends it), path-scoped to the
 * dashboard (the API never sees it), Secure when the dashboard is served over HTTPS.
 */
export function cookie(name: string, value: string, options: { secure: boolean; maxAgeSeconds?: number }) {
  return [
    `${name}=${encodeURIComponent(value)}`,
    'Path=/dashboard',
    'HttpOnly',
    'SameSite=Strict',
    ...(options.secure ? ['Secure'] : []),
    ...(options.maxAgeSeconds === undefined ? [] : [`Max-Age=${options.maxAgeSeconds}`]),
  ].join('; ');
}

export const newPreSessionValue = () => randomBytes(24).toString('base64url');

/**
 * CSRF tokens, synchroniser style: an HMAC of the session's token (or of the pre-session cookie),
 * which another site's page can neither read nor compute. Every form carries it; every POST is
 * checked, as is its Origin where the browser sends one.
 */
export function createCsrf(secret: string) {
  const key = createHmac('sha256', secret).update('svc dashboard csrf v1').digest();
  const tokenOf = (kind: 'session' | 'pre', value: string) =>
    createHmac('sha256', key).update(`${kind}:${value}`).digest('base64url');
  return {
    tokenOf,
    verify(kind: 'session' | 'pre', value: string, presented: unknown): boolean {
      if (typeof presented !== 'string') return false;
      const expected = Buffer.from(tokenOf(kind, value));
      const given = Buffer.from(presented);
      return expected.length === given.length && timingSafeEqual(expected, given);
    },
  };
}
export type Csrf = ReturnType<typeof createCsrf>;
