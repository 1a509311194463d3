import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Profile } from './profile.js';

/** The repository root (this file lives in <root>/infra/src). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Where a profile keeps its state; everything lives under <root>/.stack, which git ignores. */
export interface StackPaths {
  root: string;
  /** Binaries built by the runner, shared by every profile. */
  binDir: string;
  profileDir: string;
  secretsFile: string;
  /** Run records (<server>.json) and PostgreSQL's socket dir. */
  runDir: string;
  logsDir: string;
  dataDir: string;
  /** Rendered server configs. */
  confDir: string;
  /** The control plane's settings as KEY=VALUE lines. */
  envFile: string;
  devKeyFile: string;
  /** `npm run backup` writes here unless told --to. */
  backupsDir: string;
}

/**
 * Where the profiles keep their state: <root>/.stack, or SVC_STACK_DIR. With SVC_STACK_PORT_BASE, that
 * runs a second stack of a profile beside the first (the backup test restores into one).
 */
export function stateDirOf(root: string, env: NodeJS.ProcessEnv = process.env): string {
  return env.SVC_STACK_DIR ? resolve(env.SVC_STACK_DIR) : join(root, '.stack');
}

/** Built binaries stay in the checkout whatever SVC_STACK_DIR says: a build takes minutes. */
export const binDirOf = (root: string = REPO_ROOT): string => join(root, '.stack', 'bin');

export function stackPaths(
  profile: Profile,
  root: string = REPO_ROOT,
  stateDir = stateDirOf(root),
): StackPaths {
  const profileDir = join(stateDir, profile);
  return {
    root,
    binDir: binDirOf(root),
    profileDir,
    secretsFile: join(profileDir, 'secrets.json'),
    runDir: join(profileDir, 'run'),
    logsDir: join(profileDir, 'logs'),
    dataDir: join(profileDir, 'data'),
    confDir: join(profileDir, 'conf'),
    envFile: join(profileDir, 'control-plane.env'),
    devKeyFile: join(profileDir, 'dev-key.json'),
    backupsDir: join(profileDir, 'backups'),
  };
}
