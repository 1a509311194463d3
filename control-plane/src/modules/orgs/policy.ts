import type { AnyRole, Policy } from './schema.js';

/** A business's owner reaches everyone as an admin does. */
const isAdmin = (role: AnyRole) => role === 'admin' || role === 'owner';

/**
 * Whether two active members of an org may chat and call 1:1 (docs/orgs.md), the same both ways:
 * an admin reaches and is reached by everyone; a guest only the members of their own teams (and the
 * admins); otherwise the org's policy says: anyone, members who share a team, or only with admins.
 * A business's staff are its members (a business's policy is anyone).
 */
export function policyAllows(policy: Policy, a: AnyRole, b: AnyRole, shareTeam: boolean): boolean {
  if (isAdmin(a) || isAdmin(b)) return true;
  if (a === 'guest' || b === 'guest') return shareTeam;
  if (policy === 'anyone') return true;
  if (policy === 'teams') return shareTeam;
  return false;
}
