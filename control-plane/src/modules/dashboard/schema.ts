import { z } from 'zod';

export const ROLES = ['owner', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

/**
 * What each role may do in the dashboard (docs/dashboard.md lists it for people):
 * - a viewer reads everything but secrets;
 * - a developer also builds: apps, keys, webhooks, settings, storage, the shield secret;
 * - an owner also runs the account: its people and invitations, the balance.low threshold.
 */
export const RIGHTS = {
  read: ['owner', 'developer', 'viewer'],
  build: ['owner', 'developer'],
  reveal_secrets: ['owner', 'developer'],
  manage_team: ['owner'],
  manage_billing: ['owner'],
} as const satisfies Record<string, readonly Role[]>;
export type Right = keyof typeof RIGHTS;

export const can = (role: Role, right: Right): boolean => (RIGHTS[right] as readonly Role[]).includes(role);

/** Passwords: at least 12 characters (NIST 800-63B's advice is length, not composition), at most 256. */
export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 256;
export const EMAIL_MAX = 254;
export const NAME_MAX = 100;

/** A session lives 7 days at most, and ends after 12 hours without a request. */
export const SESSION_TTL_MS = 7 * 24 * 3_600_000;
export const SESSION_IDLE_MS = 12 * 3_600_000;
/** last_seen_at is written at most this often per session. */
export const SESSION_TOUCH_MS = 60_000;
/** An invitation link works for 3 days, once. */
export const INVITE_TTL_MS = 3 * 24 * 3_600_000;

/** Failed sign-ins: 5 per address of email, or 20 per client address, in 15 minutes; then 429 until the window ends. */
export const LOGIN_WINDOW_SECONDS = 15 * 60;
export const LOGIN_FAILURES_PER_EMAIL = 5;
export const LOGIN_FAILURES_PER_ADDRESS = 20;

export const UserRow = z.object({
  id: z.string(),
  account_id: z.string(),
  email: z.string(),
  name: z.string(),
  role: z.enum(ROLES),
  created_at: z.date(),
});
export type UserRow = z.infer<typeof UserRow>;

export const SessionRow = z.object({
  id: z.string(),
  user_id: z.string(),
  user_agent: z.string(),
  address: z.string(),
  created_at: z.date(),
  last_seen_at: z.date(),
  expires_at: z.date(),
  revoked_at: z.date().nullable(),
});
export type SessionRow = z.infer<typeof SessionRow>;

export const InviteRow = z.object({
  id: z.string(),
  account_id: z.string(),
  email: z.string(),
  role: z.enum(ROLES),
  invited_by: z.string().nullable(),
  created_at: z.date(),
  expires_at: z.date(),
  accepted_at: z.date().nullable(),
  revoked_at: z.date().nullable(),
});
export type InviteRow = z.infer<typeof InviteRow>;
