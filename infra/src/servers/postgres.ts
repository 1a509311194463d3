import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { totalmem } from 'node:os';
import { join } from 'node:path';
import { StackError } from '../errors.js';
import { run, runChecked } from '../exec.js';
import { ensureDir, writeFileAtomic } from '../files.js';
import type { OsUser } from '../os-user.js';
import { serverEnv } from '../supervisor.js';
import { dataDirOf, type ServerDefinition, type StackContext } from './types.js';

const PG_LIB_ROOT = '/usr/lib/postgresql';

function hasServerBinary(binDir: string): boolean {
  return existsSync(join(binDir, 'postgres'));
}

/**
 * The server binaries are not on PATH in Debian (only wrappers are): take pg_config's bin dir,
 * else the newest /usr/lib/postgresql/<major>/bin.
 */
function findPgBinDir(): string {
  try {
    const fromPgConfig = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
    if (hasServerBinary(fromPgConfig)) return fromPgConfig;
  } catch {
    // no pg_config: fall back to the directory layout
  }
  const majors = existsSync(PG_LIB_ROOT) ? readdirSync(PG_LIB_ROOT).filter((name) => /^\d+$/.test(name)) : [];
  const newest = majors
    .sort((a, b) => Number(b) - Number(a))
    .map((major) => join(PG_LIB_ROOT, major, 'bin'))
    .find(hasServerBinary);
  if (newest === undefined)
    throw new StackError(
      `PostgreSQL server binaries not found in ${PG_LIB_ROOT}/*/bin (apt-get install postgresql)`,
    );
  return newest;
}

let pgBinDirFound: string | undefined;
/** Looked up on first use, after the install step, then kept: health probes call it often. */
export function pgBinDir(): string {
  pgBinDirFound ??= findPgBinDir();
  return pgBinDirFound;
}

const MB = 1024 * 1024;

/** The memory this process may use: the machine's, or its cgroup's limit when lower (a container). */
function availableMemory(): number {
  const constrained = process.constrainedMemory?.() ?? 0;
  return constrained > 0 ? Math.min(totalmem(), constrained) : totalmem();
}

/**
 * PostgreSQL's own page cache: a quarter of the memory, the usual advice, from PostgreSQL's default
 * of 128 MB up to 8 GB. The default alone kept evicting an app's search indexes once it held a
 * million buzzes, and every page read again from the kernel's cache costs a copy
 * (bench/public-data.ts: search 193 → 239 calls/s, 9.4 → 7.4 ms of PostgreSQL's CPU a call). Pages are
 * taken as they are read, so profiles running side by side do not hold it all from the start.
 */
export function sharedBuffersMb(memoryBytes: number = availableMemory()): number {
  return Math.min(8 * 1024, Math.max(128, Math.floor(memoryBytes / 4 / MB)));
}

/** Only the server's user (and root) may enter it, which is what makes "trust" on the socket safe. */
function socketDir(context: StackContext): string {
  return join(context.paths.runDir, 'postgres');
}

/** Creates the cluster: superuser "postgres", password logins over TCP, trust on the private socket. */
async function initCluster(context: StackContext, user: OsUser | undefined): Promise<void> {
  const dataDir = dataDirOf(context, 'postgres');
  ensureDir(dataDir, user, 0o700);
  const passwordFile = join(context.paths.confDir, 'postgres-superuser.pw');
  writeFileAtomic(passwordFile, `${context.secrets.postgresSuperuserPassword}\n`, user);
  try {
    await runChecked(
      'PostgreSQL initdb',
      join(pgBinDir(), 'initdb'),
      [
        `--pgdata=${dataDir}`,
        '--username=postgres',
        `--pwfile=${passwordFile}`,
        '--auth-local=trust',
        '--auth-host=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
      ],
      { user, env: serverEnv(), cwd: dataDir },
    );
  } finally {
    rmSync(passwordFile, { force: true });
  }
}

/** psql statements that create role and database "svc" once and keep the role's password in sync. */
function provisioningSql(password: string): string {
  return [
    `\\set password '${password}'`,
    `SELECT 'CREATE ROLE svc' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'svc') \\gexec`,
    `ALTER ROLE svc WITH LOGIN PASSWORD :'password';`,
    `SELECT 'CREATE DATABASE svc OWNER svc' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'svc') \\gexec`,
    '',
  ].join('\n');
}

export const postgres: ServerDefinition = {
  name: 'postgres',
  aptPackages: ['postgresql'],
  osUser: 'postgres',
  // SIGINT is PostgreSQL's "fast" shutdown: abort transactions, checkpoint, exit; SIGTERM waits for clients.
  stopSignal: 'SIGINT',
  ports: ['postgres'],
  url: ({ ports }) => `postgres://127.0.0.1:${ports.postgres}/svc`,

  async prepare(context, user) {
    ensureDir(socketDir(context), user, 0o700);
    if (!existsSync(join(dataDirOf(context, 'postgres'), 'PG_VERSION'))) await initCluster(context, user);
  },

  launch(context) {
    const dataDir = dataDirOf(context, 'postgres');
    return {
      command: join(pgBinDir(), 'postgres'),
      args: [
        '-D',
        dataDir,
        '-p',
        String(context.ports.postgres),
        '-k',
        socketDir(context),
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        `shared_buffers=${sharedBuffersMb()}MB`,
      ],
      env: serverEnv(),
      cwd: dataDir,
    };
  },

  async isHealthy({ ports }) {
    const probe = await run(join(pgBinDir(), 'pg_isready'), [
      '-h',
      '127.0.0.1',
      '-p',
      String(ports.postgres),
      '-q',
    ]);
    return probe.code === 0;
  },

  async afterHealthy(context) {
    await runChecked(
      'creating the PostgreSQL role and database "svc"',
      join(pgBinDir(), 'psql'),
      [
        '-X',
        '-q',
        '-v',
        'ON_ERROR_STOP=1',
        '-h',
        socketDir(context),
        '-p',
        String(context.ports.postgres),
        '-U',
        'postgres',
        '-d',
        'postgres',
      ],
      { input: provisioningSql(context.secrets.postgresPassword), env: serverEnv() },
    );
  },
};
