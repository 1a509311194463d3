import { join } from 'node:path';
import { S3_REGION } from '../env-file.js';
import { ensureDir } from '../files.js';
import { httpOk } from '../health.js';
import { serverEnv } from '../supervisor.js';
import { dataDirOf, type GoBinary, type ServerDefinition } from './types.js';

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

export const minio: ServerDefinition = {
  name: 'minio',
  aptPackages: [],
  goBinary: MINIO_BINARY,
  stopSignal: 'SIGTERM',
  ports: ['minioS3', 'minioConsole'],
  url: ({ ports }) => `http://127.0.0.1:${ports.minioS3}`,

  async prepare(context) {
    ensureDir(dataDirOf(context, 'minio'), undefined, 0o700);
  },

  launch(context) {
    const { ports, secrets } = context;
    return {
      command: join(context.paths.binDir, MINIO_BINARY.name),
      args: [
        'server',
        dataDirOf(context, 'minio'),
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
      env: serverEnv({
        MINIO_ROOT_USER: secrets.minioRootUser,
        MINIO_ROOT_PASSWORD: secrets.minioRootPassword,
        // Requests must then be signed for the region the control plane uses.
        MINIO_SITE_REGION: S3_REGION,
        // No update checks against the internet.
        MINIO_UPDATE: 'off',
      }),
      cwd: context.paths.profileDir,
    };
  },

  isHealthy: ({ ports }) => httpOk(`http://127.0.0.1:${ports.minioS3}/minio/health/ready`),
};
