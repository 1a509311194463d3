import { z } from 'zod';
import { KEY_KINDS, KEY_MODES, type KeyKind, type KeyMode, PLANS, type Plan } from '../../platform/caller.js';

/** Daily request cap per key by plan. Scale accounts carry their own (accounts.daily_request_cap). */
export const PLAN_DAILY_REQUEST_CAP: Record<Plan, number> = {
  free: 100,
  pro: 100_000,
  // Used for a Scale account until the operator sets its custom cap.
  scale: 1_000_000,
};

export const KEY_PREFIX: Record<KeyKind, Record<KeyMode, string>> = {
  secret: { live: 'svc_live_', test: 'svc_test_' },
  publishable: { live: 'pk_live_', test: 'pk_test_' },
};

/** A well-formed key: a known prefix and 32 base62 characters. Anything else is refused unread. */
export const KEY_PATTERN = /^(svc|pk)_(live|test)_[0-9A-Za-z]{32}$/;

export const AccountRow = z.object({
  id: z.string(),
  name: z.string(),
  plan: z.enum(PLANS),
  daily_request_cap: z.number().int().nullable(),
  balance_micros: z.number().int(),
  created_at: z.date(),
});
export type AccountRow = z.infer<typeof AccountRow>;

export const AppRow = z.object({
  id: z.string(),
  account_id: z.string(),
  name: z.string(),
  created_at: z.date(),
});
export type AppRow = z.infer<typeof AppRow>;

export const KeyRow = z.object({
  id: z.string(),
  app_id: z.string(),
  kind: z.enum(KEY_KINDS),
  mode: z.enum(KEY_MODES),
  token_hint: z.string(),
  publishable_token: z.string().nullable(),
  created_at: z.date(),
  revoked_at: z.date().nullable(),
  last_used_at: z.date().nullable(),
});
export type KeyRow = z.infer<typeof KeyRow>;

/** What a presented key resolves to: the key with its app's account and plan. */
export const KeyPrincipalRow = z.object({
  key_id: z.string(),
  token_hash: z.instanceof(Buffer),
  kind: z.enum(KEY_KINDS),
  mode: z.enum(KEY_MODES),
  revoked_at: z.date().nullable(),
  app_id: z.string(),
  account_id: z.string(),
  plan: z.enum(PLANS),
  daily_request_cap: z.number().int().nullable(),
});
export type KeyPrincipalRow = z.infer<typeof KeyPrincipalRow>;
