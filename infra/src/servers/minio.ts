import { join } from 'node:path';
import { S3_REGION } from '../env-file.js';
import { ensureDir } from '../files.js';
import { httpOk } from '../health.js';
import { MINIO_DRIVES } from '../profile.js';
import { serverEnv } from '../supervisor.js';
import { dataDirOf, type GoBinary, type ServerDefinition, type StackContext } from './types.js';

/**
 * The last commit of the archived community repository. The last release tag's pseudo-version
 * (v0.0.0-20251015172955-9e49d5e7a648) is refused by the Go module proxy ("not available").
 */
const MINIO_BINARY: GoBinary = {
  name: 'minio',
  module: 'github.com/minio/minio',
  version: 'v0.0.0-20260212201848-7aac2a2c5b7c',
  builtName: 'minio',
};

/** The control plane's endpoint for bucket events (compose.yaml posts to the same path). */
export const MINIO_EVENTS_PATH = '/internal/minio/events';

/**
 * Undelivered bucket events, one file each. Beside the data dir, not in it: a top-level dir of the
 * data dir would be listed as a bucket.
 */
function queueDirOf(context: StackContext): string {
  return join(context.paths.dataDir, 'minio-queue');
}

/**
 * Settings that compose.yaml's minio service has as well, word for word (infra/test/compose.test.ts
 * compares them). The target PRIMARY is where bucket events go; the control plane subscribes its
 * bucket to it (arn:minio:sqs::PRIMARY:webhook).
 */
export const MINIO_SHARED_SETTINGS: Readonly<Record<string, string>> = {
  MINIO_NOTIFY_WEBHOOK_ENABLE_PRIMARY: 'on',
  // About 1 KB per event; past the limit, new events are dropped (and logged).
  MINIO_NOTIFY_WEBHOOK_QUEUE_LIMIT_PRIMARY: '100000',
  // An S3 request is answered only once its event is in the queue dir, instead of after an
  // in-memory hand-off that a crash loses.
  MINIO_API_SYNC_EVENTS: 'on',
  // Incomplete multipart uploads are removed after this (lifecycle rules cannot abort them here).
  MINIO_API_STALE_UPLOADS_EXPIRY: '24h',
};

/**
 * Its drives: the data dir itself, or data/minio/d1 … dN, one erasure set that MinIO's ellipsis
 * argument names (d{1...4}).
 */
export function minioDrives(context: StackContext): { dirs: string[]; argument: string } {
  const dataDir = dataDirOf(context, 'minio');
  const count = MINIO_DRIVES[context.profile];
  if (count === 1) return { dirs: [dataDir], argument: dataDir };
  const dirs = Array.from({ length: count }, (_, index) => join(dataDir, `d${index + 1}`));
  return { dirs, argument: join(dataDir, `d{1...${count}}`) };
}

/** MinIO's environment in a profile. */
export function minioEnvironment(context: StackContext): Record<string, string> {
  const { ports, secrets } = context;
  const erasureCoded = MINIO_DRIVES[context.profile] > 1;
  return {
    // With several drives MinIO refuses any on the root filesystem, taken for the OS disk (every
    // drive is, on one machine); drives of at most 1 MiB count as "root" instead, so none does.
    ...(erasureCoded ? { MINIO_ROOTDISK_THRESHOLD_SIZE: '1MiB' } : {}),
    MINIO_ROOT_USER: secrets.minioRootUser,
    MINIO_ROOT_PASSWORD: secrets.minioRootPassword,
    // Requests must then be signed for the region the control plane uses.
    MINIO_SITE_REGION: S3_REGION,
    // No update checks against the internet.
    MINIO_UPDATE: 'off',
    ...MINIO_SHARED_SETTINGS,
    MINIO_NOTIFY_WEBHOOK_ENDPOINT_PRIMARY: `http://127.0.0.1:${ports.controlPlaneInternal}${MINIO_EVENTS_PATH}`,
    // One word, so MinIO sends "Authorization: Bearer <secret>".
    MINIO_NOTIFY_WEBHOOK_AUTH_TOKEN_PRIMARY: secrets.minioWebhookSecret,
    // Every event is written here first and deleted once the control plane answers 2xx, so events
    // survive the control plane being down (it starts after MinIO) and MinIO restarting.
    MINIO_NOTIFY_WEBHOOK_QUEUE_DIR_PRIMARY: queueDirOf(context),
  };
}

export const minio: ServerDefinition = {
  name: 'minio',
  aptPackages: [],
  goBinary: MINIO_BINARY,
  stopSignal: 'SIGTERM',
  ports: ['minioS3', 'minioConsole'],
  url: ({ ports }) => `http://127.0.0.1:${ports.minioS3}`,

  async prepare(context) {
    ensureDir(dataDirOf(context, 'minio'), undefined, 0o700);
    for (const drive of minioDrives(context).dirs) ensureDir(drive, undefined, 0o700);
    // Events carry object keys and metadata.
    ensureDir(queueDirOf(context), undefined, 0o700);
  },

  launch(context) {
    const { ports } = context;
    return {
      command: join(context.paths.binDir, MINIO_BINARY.name),
      args: [
        'server',
        minioDrives(context).argument,
        '--address',
        `127.0.0.1:${ports.minioS3}`,
        // Without it the console takes a random port.
        '--console-address',
        `127.0.0.1:${ports.minioConsole}`,
        // Its default is ~/.minio/certs, outside the profile.
        '--certs-dir',
        join(context.paths.confDir, 'minio-certs'),
      ],
      // Credentials through the environment, never on a command line that `ps` shows.
      env: serverEnv(minioEnvironment(context)),
      cwd: context.paths.profileDir,
    };
  },

  // /minio/health/ready answers 200 while an erasure set still waits for its drives; cluster means
  // write quorum, the same as ready on one drive.
  isHealthy: ({ ports }) => httpOk(`http://127.0.0.1:${ports.minioS3}/minio/health/cluster`),
};
