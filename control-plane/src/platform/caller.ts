/** Who calls: the app and key mode a key resolves to, as every layer sees it. */

export const PLANS = ['free', 'pro', 'scale'] as const;
export type Plan = (typeof PLANS)[number];
export const KEY_MODES = ['live', 'test'] as const;
export type KeyMode = (typeof KEY_MODES)[number];
export const KEY_KINDS = ['secret', 'publishable'] as const;
export type KeyKind = (typeof KEY_KINDS)[number];

/** The caller of a keyed request. */
export interface Principal {
  keyId: string;
  appId: string;
  accountId: string;
  mode: KeyMode;
  plan: Plan;
  dailyRequestCap: number;
}

/** An app in one key mode: what most services act on (a key's principal is one). */
export interface AppScope {
  appId: string;
  mode: KeyMode;
}

/** Who pays for usage: the app of a key, in the key's mode, and the app's account. */
export interface Payer {
  accountId: string;
  appId: string;
  mode: KeyMode;
  /** The org (its id) whose identities made usage known afterwards: its usage lines are the org's. */
  orgId?: string;
}

/** Why a presented key was refused: each case gets its own 401 message. */
export type KeyRefusal = 'malformed' | 'publishable' | 'secret' | 'unknown' | 'revoked';

export type KeyCheck = { ok: true; principal: Principal } | { ok: false; refusal: KeyRefusal };

/** Resolves presented keys; the accounts module implements it, the HTTP pipeline calls it. */
/** Resolves keys; `beforeLookup` runs before a key the resolver does not hold is looked up. */
export interface KeyResolver {
  checkSecretKey(token: string, beforeLookup?: () => Promise<void>): Promise<KeyCheck>;
  checkPublishableKey(token: string, beforeLookup?: () => Promise<void>): Promise<KeyCheck>;
}

/** The caller of a /v1/me/… request: an app's user, vouched for by a user token the app's key minted. */
export interface UserPrincipal extends Principal {
  /** The app's own id of the user, as given. */
  userId: string;
}

/**
 * A caller's place among calls taken together in one transaction (Metering.charge's `together`): by
 * app, mode and user, which names the rows a user's writes lock first (their profile). The user id
 * goes in as the hex of its UTF-8 bytes, so that this string's code-unit order is PostgreSQL's "C"
 * collation order of the ids, the order in which other writers lock several profiles.
 */
export const callerOrder = (caller: AppScope & { userId?: string }) =>
  [caller.appId, caller.mode, Buffer.from(caller.userId ?? '').toString('hex')].join('\t');

/** Why a user token was refused (none counts toward the address's invalid-key lockout). */
export type UserRefusal = 'malformed' | 'invalid' | 'expired' | 'revoked' | 'key-revoked';

export type UserCheck = { ok: true; principal: UserPrincipal } | { ok: false; refusal: UserRefusal };

/** Verifies user tokens; the users module implements it, the HTTP pipeline calls it. */
export interface UserTokenVerifier {
  checkUserToken(token: string): Promise<UserCheck>;
}
