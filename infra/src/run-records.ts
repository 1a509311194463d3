import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from './files.js';

/**
 * What the runner knows about a server it started, in run/<server>.json. The kernel's start time
 * of the pid (with the boot id) is what proves, later, that the pid is still that process and not
 * a new one that reused the number.
 */
export interface RunRecord {
  server: string;
  pid: number;
  command: string[];
  user: string;
  startedAt: string;
  /** Field 22 of /proc/<pid>/stat: clock ticks after boot when the process started. */
  startTicks: number;
  bootId: string;
  logFile: string;
}

const BOOT_ID_FILE = '/proc/sys/kernel/random/boot_id';

export function currentBootId(): string {
  return readFileSync(BOOT_ID_FILE, 'utf8').trim();
}

interface ProcStat {
  state: string;
  startTicks: number;
}

/**
 * The fields of /proc/<pid>/stat from field 3 (the state) on, or undefined when there is no such
 * process. The command name (field 2) is in parentheses and may itself hold spaces or parentheses.
 */
export function procStatFields(pid: number | string): string[] | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** A size of /proc/<pid>/status (VmRSS) or smaps_rollup (Pss) in KiB; undefined once the process is gone. */
export function procKiB(
  pid: number,
  file: 'status' | 'smaps_rollup',
  field: 'VmRSS' | 'Pss',
): number | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/${file}`, 'utf8');
    const value = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1];
    return value === undefined ? undefined : Number(value);
  } catch {
    return undefined;
  }
}

/** /proc/<pid>/stat, or undefined when there is no such process. */
export function readProcStat(pid: number): ProcStat | undefined {
  const fields = procStatFields(pid);
  return fields && { state: fields[0] ?? '', startTicks: Number(fields[19]) };
}

/** True while the recorded process runs: same pid, same start time, same boot, and not a zombie. */
export function isRecordAlive(record: RunRecord): boolean {
  const stat = readProcStat(record.pid);
  return (
    stat !== undefined &&
    stat.state !== 'Z' &&
    stat.startTicks === record.startTicks &&
    record.bootId === currentBootId()
  );
}

function runRecordFile(runDir: string, server: string): string {
  return join(runDir, `${server}.json`);
}

export function readRunRecord(runDir: string, server: string): RunRecord | undefined {
  const file = runRecordFile(runDir, server);
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as RunRecord;
  } catch {
    // A truncated record cannot prove anything about a process: treat it as absent.
    return undefined;
  }
}

export function writeRunRecord(runDir: string, record: RunRecord): void {
  writeFileAtomic(
    runRecordFile(runDir, record.server),
    `${JSON.stringify(record, null, 2)}\n`,
    undefined,
    0o644,
  );
}

export function removeRunRecord(runDir: string, server: string): void {
  rmSync(runRecordFile(runDir, server), { force: true });
}

/** The records of a run dir whose processes run now, by unit name. */
export function runningRecords(runDir: string): RunRecord[] {
  return readdirSync(runDir)
    .filter((file) => file.endsWith('.json'))
    .map((file) => readRunRecord(runDir, file.slice(0, -'.json'.length)))
    .filter((record): record is RunRecord => record !== undefined && isRecordAlive(record))
    .sort((a, b) => a.server.localeCompare(b.server));
}
