import { join } from 'node:path';
import { writeControlPlaneEnv } from './env-file.js';
import { StackError } from './errors.js';
import { ensureDir } from './files.js';
import { tailLines } from './logs.js';
import { serviceUser } from './os-user.js';
import { stackPaths } from './paths.js';
import { assertPortsFree, portBase, portMap } from './ports.js';
import type { Profile } from './profile.js';
import { isRecordAlive, readRunRecord, removeRunRecord } from './run-records.js';
import { ensureSecrets } from './secrets.js';
import {
  instancesOf,
  ownPorts,
  type ServerDefinition,
  type StackContext,
  unitName,
} from './servers/types.js';
import { START_MARKER, startDetached, stopRecorded } from './supervisor.js';
import { waitUntil } from './wait.js';

const HEALTH_TIMEOUT_MS = 60_000;
/** Longer than the control plane's default 10 s drain, so a graceful stop is never cut short. */
const STOP_TIMEOUT_MS = 15_000;
const FAILURE_LOG_LINES = 20;

export function createContext(profile: Profile): StackContext {
  const paths = stackPaths(profile);
  for (const dir of [paths.profileDir, paths.runDir, paths.logsDir, paths.dataDir, paths.confDir])
    ensureDir(dir);
  return { profile, paths, ports: portMap(portBase(profile)), secrets: ensureSecrets(paths.secretsFile) };
}

/**
 * One process the runner supervises: a server, or one instance of a replicated server with the
 * context that gives it its own ports, data dir and config files.
 */
export interface Unit {
  name: string;
  server: ServerDefinition;
  context: StackContext;
}

/** The units of the servers in a profile: replicated servers once per instance of REPLICAS. */
export function unitsOf(context: StackContext, servers: readonly ServerDefinition[]): Unit[] {
  const instances = instancesOf(context.profile);
  return servers.flatMap((server): Unit[] => {
    if (!server.replicated || instances.length === 0) return [{ name: server.name, server, context }];
    return instances.map((instance) => ({
      name: unitName(server.name, instance.name),
      server,
      context: { ...context, instance },
    }));
  });
}

export function logFileOf(context: StackContext, unit: string): string {
  return join(context.paths.logsDir, `${unit}.log`);
}

function report(server: string, message: string): void {
  console.log(`${server.padEnd(16)} ${message}`);
}

function seconds(sinceMs: number): string {
  return `${((Date.now() - sinceMs) / 1000).toFixed(1)} s`;
}

/** A failure message that names the log file and shows its last lines from the latest start. */
function startFailure(context: StackContext, server: string, problem: string): StackError {
  const logFile = logFileOf(context, server);
  const recent = tailLines(logFile, FAILURE_LOG_LINES);
  const lines = recent.slice(recent.findLastIndex((line) => line.startsWith(START_MARKER)) + 1);
  const tail =
    lines.length > 0
      ? `last ${lines.length} log lines:\n${lines.map((line) => `  ${line}`).join('\n')}`
      : '(the log is empty)';
  return new StackError(`${problem}.\nlog: ${logFile}\n${tail}`);
}

/**
 * Waits until the server is healthy (true) or the timeout passes (false). `died` says why the
 * process is gone, or undefined while it runs: a dead server fails the wait at once.
 */
async function waitHealthy(unit: Unit, died: () => string | undefined): Promise<boolean> {
  return waitUntil(async () => {
    const problem = died();
    if (problem !== undefined) {
      removeRunRecord(unit.context.paths.runDir, unit.name);
      throw startFailure(unit.context, unit.name, problem);
    }
    return unit.server.isHealthy(unit.context);
  }, HEALTH_TIMEOUT_MS);
}

/**
 * Reuses the recorded process if it is alive and healthy; otherwise starts a fresh one and calls
 * `onStarted` as soon as its process runs, before anything that may still fail (health, setup).
 */
async function ensureRunning(unit: Unit, onStarted: () => void): Promise<void> {
  const { server, context } = unit;
  const { runDir } = context.paths;
  const existing = readRunRecord(runDir, unit.name);
  if (existing && isRecordAlive(existing)) {
    const gone = () =>
      isRecordAlive(existing) ? undefined : 'exited while waiting for it to become healthy';
    if (!(await waitHealthy(unit, gone)))
      throw startFailure(
        context,
        unit.name,
        `runs (pid ${existing.pid}) but is not healthy after ${HEALTH_TIMEOUT_MS / 1000} s; "stack down" then "stack up" restarts it`,
      );
    await server.afterHealthy?.(context);
    report(unit.name, `already running, reused (pid ${existing.pid})`);
    return;
  }
  if (existing) removeRunRecord(runDir, unit.name);

  await assertPortsFree(server.ports, ownPorts(context));
  // An instance's rendered configs (confFileOf).
  if (context.instance) ensureDir(join(context.paths.confDir, context.instance.name));
  const user = serviceUser(server.osUser);
  await server.prepare(context, user);
  const startedAt = Date.now();
  const { record, exited } = await startDetached(server.launch(context), {
    logFile: logFileOf(context, unit.name),
    runDir,
    server: unit.name,
    user,
  });
  // Ours from now on: if its setup fails below, the caller's down() must still stop it.
  onStarted();
  let exitCode: number | null | undefined;
  void exited.then((code) => {
    exitCode = code;
  });
  const gone = () =>
    exitCode === undefined ? undefined : `exited while starting (exit ${exitCode ?? 'by a signal'})`;
  if (!(await waitHealthy(unit, gone))) {
    // Ours and useless: stop it rather than leave it holding its ports.
    await stopRecorded(record, server.stopSignal, STOP_TIMEOUT_MS);
    removeRunRecord(runDir, unit.name);
    throw startFailure(context, unit.name, `did not become healthy within ${HEALTH_TIMEOUT_MS / 1000} s`);
  }
  await server.afterHealthy?.(context);
  report(unit.name, `started, healthy in ${seconds(startedAt)} (pid ${record.pid})`);
}

export interface UpResult {
  /**
   * Units this call started (not reused), also those that then failed their health wait or setup:
   * the ones a test run stops again.
   */
  started: string[];
  failures: Error[];
}

const isControlPlane = (unit: Unit) => unit.server.name === 'control-plane';

/**
 * Starts the selected servers: the backing servers in parallel (a cluster's nodes together: an
 * ejabberd node waits for the one that stopped last), then the control plane, which needs them and
 * runs its migrations as it starts. Reuses whatever already runs healthy.
 */
export async function up(context: StackContext, servers: readonly ServerDefinition[]): Promise<UpResult> {
  writeControlPlaneEnv(context.paths.envFile, context.ports, context.secrets);
  const units = unitsOf(context, servers);
  const phases = [units.filter((unit) => !isControlPlane(unit)), units.filter(isControlPlane)];
  const result: UpResult = { started: [], failures: [] };
  for (const phase of phases) {
    const outcomes = await Promise.allSettled(
      phase.map((unit) => ensureRunning(unit, () => result.started.push(unit.name))),
    );
    outcomes.forEach((outcome, index) => {
      const name = phase[index]?.name as string;
      // Every failure names its server, whichever step (port check, prepare, health, setup) failed.
      if (outcome.status === 'rejected')
        result.failures.push(new StackError(`${name}: ${(outcome.reason as Error).message}`));
    });
    if (result.failures.length > 0) break;
  }
  return result;
}

async function stopUnit({ name, server, context }: Unit): Promise<void> {
  const record = readRunRecord(context.paths.runDir, name);
  if (record === undefined) return;
  // A dead record, or a pid that now belongs to another process, is only cleaned up.
  const timeoutMs = server.stopTimeoutMs ?? STOP_TIMEOUT_MS;
  const outcome = await stopRecorded(record, server.stopSignal, timeoutMs);
  removeRunRecord(context.paths.runDir, name);
  const messages = {
    stopped: `stopped (pid ${record.pid})`,
    killed: `killed after ${timeoutMs / 1000} s without stopping (pid ${record.pid})`,
    'not-running': 'was not running; record removed',
  } as const;
  report(name, messages[outcome]);
}

/** Stops the recorded units: the control plane first, as it depends on the others. */
export async function down(_context: StackContext, units: readonly Unit[]): Promise<void> {
  for (const phase of [units.filter(isControlPlane), units.filter((unit) => !isControlPlane(unit))])
    await Promise.all(phase.map(stopUnit));
}

export interface ServerStatus {
  server: string;
  pid: number | undefined;
  alive: boolean;
  healthy: boolean;
  url: string;
}

export async function status(units: readonly Unit[]): Promise<ServerStatus[]> {
  return Promise.all(
    units.map(async ({ name, server, context }) => {
      const record = readRunRecord(context.paths.runDir, name);
      const alive = record !== undefined && isRecordAlive(record);
      return {
        server: name,
        pid: alive ? record?.pid : undefined,
        alive,
        healthy: alive && (await server.isHealthy(context)),
        url: server.url(context),
      };
    }),
  );
}

export function formatStatus(rows: readonly ServerStatus[]): string {
  const table = [
    ['server', 'pid', 'alive', 'healthy', 'url'],
    ...rows.map((row) => [
      row.server,
      row.pid === undefined ? '-' : String(row.pid),
      row.alive ? 'yes' : 'no',
      row.alive ? (row.healthy ? 'yes' : 'no') : '-',
      row.url,
    ]),
  ];
  const widths =
    table[0]?.map((_, column) => Math.max(...table.map((cells) => cells[column]?.length ?? 0))) ?? [];
  return table
    .map((cells) =>
      cells
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
