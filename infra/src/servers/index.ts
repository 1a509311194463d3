import { UsageError } from '../errors.js';
import { isClustered, type Profile } from '../profile.js';
import { ai } from './ai.js';
import { controlPlane } from './control-plane.js';
import { ejabberd } from './ejabberd.js';
import { livekit } from './livekit.js';
import { minio } from './minio.js';
import { postgres } from './postgres.js';
import { proxy } from './proxy.js';
import { redis } from './redis.js';
import { SERVER_NAMES, type ServerDefinition } from './types.js';

/** In start order; every server before the control plane is independent of the others. */
export const SERVERS: readonly ServerDefinition[] = [
  postgres,
  redis,
  ejabberd,
  livekit,
  minio,
  ai,
  proxy,
  controlPlane,
];

/**
 * Every server of a profile. The test profile needs its own control plane as well: ejabberd asks it
 * about every login that the end-to-end tests make. The proxy only fronts replicas.
 */
export function profileServers(profile: Profile): ServerDefinition[] {
  return SERVERS.filter((server) => !server.clusterOnly || isClustered(profile));
}

/** The servers a command acts on: --only's list (comma-separated), else the profile's default. */
export function selectServers(profile: Profile, only: string | undefined): ServerDefinition[] {
  if (only === undefined) return profileServers(profile);
  const names = only
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = names.filter((name) => !(SERVER_NAMES as readonly string[]).includes(name));
  if (unknown.length > 0 || names.length === 0)
    throw new UsageError(
      `--only takes a comma-separated list of: ${SERVER_NAMES.join(', ')} (got "${only}")`,
    );
  return profileServers(profile).filter((server) => names.includes(server.name));
}
