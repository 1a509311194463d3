import { UsageError } from '../errors.js';
import type { Profile } from '../profile.js';
import { ai } from './ai.js';
import { controlPlane } from './control-plane.js';
import { ejabberd } from './ejabberd.js';
import { livekit } from './livekit.js';
import { minio } from './minio.js';
import { postgres } from './postgres.js';
import { redis } from './redis.js';
import { SERVER_NAMES, type ServerDefinition, type ServerName } from './types.js';

/** In start order; every server before the control plane is independent of the others. */
export const SERVERS: readonly ServerDefinition[] = [
  postgres,
  redis,
  ejabberd,
  livekit,
  minio,
  ai,
  controlPlane,
];

/**
 * Every server in both profiles. The test profile needs its own control plane as well: ejabberd's
 * auth bridge asks it about every login that the end-to-end tests make.
 */
const DEFAULT_SERVERS: Record<Profile, readonly ServerName[]> = { dev: SERVER_NAMES, test: SERVER_NAMES };

/** The servers a command acts on: --only's list (comma-separated), else the profile's default. */
export function selectServers(profile: Profile, only: string | undefined): ServerDefinition[] {
  if (only === undefined) return SERVERS.filter((server) => DEFAULT_SERVERS[profile].includes(server.name));
  const names = only
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = names.filter((name) => !(SERVER_NAMES as readonly string[]).includes(name));
  if (unknown.length > 0 || names.length === 0)
    throw new UsageError(
      `--only takes a comma-separated list of: ${SERVER_NAMES.join(', ')} (got "${only}")`,
    );
  return SERVERS.filter((server) => names.includes(server.name));
}
