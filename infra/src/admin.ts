import { join } from 'node:path';
import { loadProfileEnv } from './env-file.js';
import { type RunOptions, type RunResult, run } from './exec.js';
import { REPO_ROOT } from './paths.js';
import { parseProfile } from './profile.js';

const TSX = join(REPO_ROOT, 'node_modules', '.bin', 'tsx');
const ADMIN_SCRIPT = join(REPO_ROOT, 'control-plane', 'src', 'cli', 'admin.ts');

/** Runs the control plane's admin CLI with the given settings in its environment. */
export function runAdmin(args: readonly string[], options: RunOptions): Promise<RunResult> {
  return run(TSX, [ADMIN_SCRIPT, ...args], { cwd: REPO_ROOT, ...options });
}

/** Takes "--profile NAME" or "--profile=NAME" out of the admin CLI's arguments, wherever it stands. */
export function extractProfileOption(args: readonly string[]): {
  profile: string | undefined;
  rest: string[];
} {
  const rest: string[] = [];
  let profile: string | undefined;
  for (let index = 0; index < args.length; index++) {
    const arg = args[index] as string;
    if (arg === '--profile') profile = args[++index];
    else if (arg.startsWith('--profile=')) profile = arg.slice('--profile='.length);
    else rest.push(arg);
  }
  return { profile, rest };
}

/**
 * `npm run admin -- ...`: the admin CLI against a profile's database (dev unless --profile test).
 * An SVC_DATABASE_URL already in the environment wins, so it also serves any other deployment.
 */
export async function adminCommand(args: readonly string[]): Promise<number> {
  const { profile, rest } = extractProfileOption(args);
  const env = process.env.SVC_DATABASE_URL
    ? process.env
    : { ...process.env, ...loadProfileEnv(parseProfile(profile)) };
  return (await runAdmin(rest, { env, inherit: true })).code;
}
