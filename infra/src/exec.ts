import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { delimiter, join } from 'node:path';
import { StackError } from './errors.js';
import { isRoot, type OsUser } from './os-user.js';

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Run as this user (the runner is root). */
  user?: OsUser;
  /** Written to the command's stdin. */
  input?: string;
  /** Connect the command to the terminal instead of capturing its output. */
  inherit?: boolean;
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The shell's convention: a command killed by a signal exits 128 + the signal's number. */
function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  return 128 + (signal ? osConstants.signals[signal] : 0);
}

/** Runs a command to completion; never throws for a non-zero exit, only when it cannot start. */
export function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const output = options.inherit ? 'inherit' : 'pipe';
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      uid: options.user?.uid,
      gid: options.user?.gid,
      stdio: [options.input !== undefined ? 'pipe' : options.inherit ? 'inherit' : 'ignore', output, output],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(error.code === 'ENOENT' ? new StackError(`${command}: command not found`) : error),
    );
    child.once('close', (code, signal) => resolve({ code: exitCodeOf(code, signal), stdout, stderr }));
    // A command that exits without reading its input closes the pipe; its exit code tells the story.
    child.stdin?.on('error', () => {});
    child.stdin?.end(options.input);
  });
}

/** Like run, but a non-zero exit is a StackError naming the step and showing the end of its output. */
export async function runChecked(
  what: string,
  command: string,
  args: readonly string[],
  options: RunOptions = {},
): Promise<RunResult> {
  const result = await run(command, args, options);
  if (result.code === 0) return result;
  const output = `${result.stdout}${result.stderr}`.trimEnd().split('\n').slice(-20).join('\n');
  throw new StackError(
    `${what} failed (exit ${result.code}): ${[command, ...args].join(' ')}${output ? `\n${output}` : ''}`,
  );
}

/** The command line for a system change (apt, /usr/sbin): through sudo unless already root. */
export function privileged(command: string, args: readonly string[]): [string, string[]] {
  return isRoot() ? [command, [...args]] : ['sudo', [command, ...args]];
}

export function findOnPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this dir
    }
  }
  return undefined;
}
