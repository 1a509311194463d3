import { UsageError } from './errors.js';

/** A stack profile: its own ports, secrets and state, so a test run never touches the dev stack. */
export const PROFILES = ['dev', 'test'] as const;
export type Profile = (typeof PROFILES)[number];

export function parseProfile(value: string | undefined): Profile {
  if (value === undefined) return 'dev';
  if ((PROFILES as readonly string[]).includes(value)) return value as Profile;
  throw new UsageError(`unknown profile "${value}" (expected one of: ${PROFILES.join(', ')})`);
}
