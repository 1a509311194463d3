import { UsageError } from './errors.js';

/**
 * A stack profile: its own ports, secrets and state, so a test run never touches the dev stack.
 * `scale` runs the clustered topology on one machine (docs/scaling.md).
 */
export const PROFILES = ['dev', 'test', 'scale'] as const;
export type Profile = (typeof PROFILES)[number];

export function parseProfile(value: string | undefined): Profile {
  if (value === undefined) return 'dev';
  if ((PROFILES as readonly string[]).includes(value)) return value as Profile;
  throw new UsageError(`unknown profile "${value}" (expected one of: ${PROFILES.join(', ')})`);
}

/**
 * The instances of each replicated server (control plane, ejabberd, LiveKit): none in a single-node
 * profile, where each runs once under its own name.
 */
export const REPLICAS: Record<Profile, readonly string[]> = { dev: [], test: [], scale: ['a', 'b'] };

/** MinIO's drives: one, or four in one erasure set (parity EC:2, so any two may fail for reads). */
export const MINIO_DRIVES: Record<Profile, number> = { dev: 1, test: 1, scale: 4 };

export function isClustered(profile: Profile): boolean {
  return REPLICAS[profile].length > 0;
}
