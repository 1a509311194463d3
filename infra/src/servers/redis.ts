import { join } from 'node:path';
import { ensureDir, writeFileAtomic } from '../files.js';
import { redisPing } from '../health.js';
import type { PortMap } from '../ports.js';
import { serverEnv } from '../supervisor.js';
import { dataDirOf, type ServerDefinition, type StackContext } from './types.js';

function configFile(context: StackContext): string {
  return join(context.paths.confDir, 'redis.conf');
}

/** redis.conf for one loopback instance; quoted values follow Redis's own string syntax. */
export function renderRedisConfig(ports: PortMap, password: string, dataDir: string): string {
  return [
    '# Rendered by infra/src/servers/redis.ts on every start; edits are overwritten.',
    'bind 127.0.0.1',
    'protected-mode yes',
    `port ${ports.redis}`,
    `requirepass ${password}`,
    `dir ${JSON.stringify(dataDir)}`,
    'appendonly yes',
    // The append-only file is what a restart loads. Redis's default snapshots wrote the whole dataset
    // again every minute under load (60 s and 10,000 changes); one an hour at most is enough.
    'save 3600 1',
    'daemonize no',
    // Empty means stdout, which the runner sends to logs/redis.log.
    'logfile ""',
    '',
  ].join('\n');
}

export const redis: ServerDefinition = {
  name: 'redis',
  aptPackages: ['redis-server'],
  osUser: 'redis',
  // SIGTERM makes Redis flush the append-only file and exit cleanly.
  stopSignal: 'SIGTERM',
  ports: ['redis'],
  url: ({ ports }) => `redis://127.0.0.1:${ports.redis}/0`,

  async prepare(context, user) {
    const dataDir = dataDirOf(context, 'redis');
    ensureDir(dataDir, user, 0o700);
    // Holds the password: readable by the server's user only.
    writeFileAtomic(
      configFile(context),
      renderRedisConfig(context.ports, context.secrets.redisPassword, dataDir),
      user,
    );
  },

  launch(context) {
    return {
      command: 'redis-server',
      args: [configFile(context)],
      env: serverEnv(),
      cwd: dataDirOf(context, 'redis'),
    };
  },

  isHealthy: ({ ports, secrets }) => redisPing(ports.redis, secrets.redisPassword),
};
