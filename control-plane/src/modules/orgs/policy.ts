import type { Policy, Role } from './schema.js';

/**
 * Whether two active members of an org may chat and call 1:1 (docs/orgs.md), the same both ways:
 * an admin reaches and is reached by everyone; a guest only the members of their own teams (and the
 * admins); otherwise the org's policy says: anyone, members who share a team, or only with admins.
 */
export function policyAllows(policy: Policy, a: Role, b: Role, shareTeam: boolean): boolean {
  if (a === 'admin' || b === 'admin') return true;
  if (a === 'guest' || b === 'guest') return shareTeam;
  if (policy === 'anyone') return true;
  if (policy === 'teams') return shareTeam;
  return false;
}
