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
}

export function stackPaths(profile: Profile, root: string = REPO_ROOT): StackPaths {
  const stateDir = join(root, '.stack');
  const profileDir = join(stateDir, profile);
  return {
    root,
    binDir: join(stateDir, 'bin'),
    profileDir,
    secretsFile: join(profileDir, 'secrets.json'),
    runDir: join(profileDir, 'run'),
    logsDir: join(profileDir, 'logs'),
    dataDir: join(profileDir, 'data'),
    confDir: join(profileDir, 'conf'),
    envFile: join(profileDir, 'control-plane.env'),
    devKeyFile: join(profileDir, 'dev-key.json'),
  };
}
