import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, closeSync, fchownSync, openSync } from 'node:fs';
import { userInfo } from 'node:os';
import { StackError } from './errors.js';
import type { OsUser } from './os-user.js';
import { currentBootId, isRecordAlive, type RunRecord, readProcStat, writeRunRecord } from './run-records.js';
import { waitUntil } from './wait.js';

/** Starts the line the runner writes into a server's log before each start. */
export const START_MARKER = '--- stack: starting';

export interface LaunchSpec {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  cwd: string;
}

/**
 * The environment of a server: only what it needs, so the operator's shell variables (tokens,
 * proxies) do not leak into long-running daemons running as other users.
 */
export function serverEnv(extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, LANG: 'C.UTF-8', ...extra };
}

export interface StartedProcess {
  record: RunRecord;
  /** Resolves with the exit code if the process ends while this runner is still alive. */
  exited: Promise<number | null>;
}

/**
 * Starts a server in its own session and process group, detached from the runner so it outlives
 * it, with stdout and stderr appended to its log file, and records it in run/<server>.json.
 */
export async function startDetached(
  spec: LaunchSpec,
  options: { server: string; logFile: string; runDir: string; user: OsUser | undefined },
): Promise<StartedProcess> {
  const commandLine = [spec.command, ...spec.args];
  const startedAt = new Date().toISOString();
  // A marker per start, so that the lines of this attempt stand out from earlier runs.
  appendFileSync(options.logFile, `\n${START_MARKER} ${startedAt}: ${commandLine.join(' ')}\n`);
  const log = openSync(options.logFile, 'a');
  let child: ReturnType<typeof spawn>;
  try {
    if (options.user) fchownSync(log, options.user.uid, options.user.gid);
    child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      uid: options.user?.uid,
      gid: options.user?.gid,
      detached: true,
      stdio: ['ignore', log, log],
    });
  } finally {
    closeSync(log);
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    await Promise.race([once(child, 'spawn'), once(child, 'error').then(([error]) => Promise.reject(error))]);
  } catch (error) {
    throw new StackError(`could not start ${spec.command}: ${(error as Error).message}`);
  }
  child.unref();
  const pid = child.pid as number;
  const record: RunRecord = {
    server: options.server,
    pid,
    command: commandLine,
    user: options.user?.name ?? userInfo().username,
    startedAt,
    startTicks: readProcStat(pid)?.startTicks ?? -1,
    bootId: currentBootId(),
    logFile: options.logFile,
  };
  writeRunRecord(options.runDir, record);
  return { record, exited };
}

export type StopOutcome = 'stopped' | 'killed' | 'not-running';

/**
 * Stops a recorded process with its graceful signal, then SIGKILLs its whole process group if it
 * is still there after the timeout. Signals go only to a pid that is provably the recorded process.
 */
export async function stopRecorded(
  record: RunRecord,
  signal: NodeJS.Signals,
  timeoutMs: number,
): Promise<StopOutcome> {
  if (!isRecordAlive(record)) return 'not-running';
  sendSignal(record.pid, signal);
  if (await waitUntil(() => !isRecordAlive(record), timeoutMs)) return 'stopped';
  // The group too (a negative pid): helpers it forked must not outlive it.
  if (isRecordAlive(record)) sendSignal(-record.pid, 'SIGKILL');
  await waitUntil(() => !isRecordAlive(record), 5_000);
  return 'killed';
}

/** process.kill, except that a process which has just exited by itself is not an error. */
function sendSignal(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
