import { describe, expect, it } from 'vitest';
import { policyAllows } from './policy.js';
import { POLICIES, ROLES } from './schema.js';

describe('policyAllows', () => {
  it('is the same both ways for every policy, pair of roles and team relation', () => {
    for (const policy of POLICIES)
      for (const a of ROLES)
        for (const b of ROLES)
          for (const shareTeam of [true, false])
            expect(policyAllows(policy, a, b, shareTeam)).toBe(policyAllows(policy, b, a, shareTeam));
  });

  it('lets admins reach everyone, whatever the policy and the teams', () => {
    for (const policy of POLICIES)
      for (const role of ROLES) expect(policyAllows(policy, 'admin', role, false)).toBe(true);
  });

  it('holds guests to their teams, whatever the policy', () => {
    for (const policy of POLICIES) {
      expect(policyAllows(policy, 'guest', 'member', false)).toBe(false);
      expect(policyAllows(policy, 'guest', 'guest', false)).toBe(false);
      expect(policyAllows(policy, 'guest', 'member', true)).toBe(true);
    }
  });

  it('follows the policy between members', () => {
    expect(policyAllows('anyone', 'member', 'member', false)).toBe(true);
    expect(policyAllows('teams', 'member', 'member', false)).toBe(false);
    expect(policyAllows('teams', 'member', 'member', true)).toBe(true);
    expect(policyAllows('admins', 'member', 'member', true)).toBe(false);
  });
});
