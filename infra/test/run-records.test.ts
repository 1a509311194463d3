import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  currentBootId,
  isRecordAlive,
  procKiB,
  type RunRecord,
  readProcStat,
  readRunRecord,
  removeRunRecord,
  runningRecords,
  writeRunRecord,
} from '../src/run-records.js';

function recordOf(pid: number, overrides: Partial<RunRecord> = {}): RunRecord {
  return {
    server: 'redis',
    pid,
    command: ['redis-server'],
    user: 'redis',
    startedAt: new Date().toISOString(),
    startTicks: readProcStat(pid)?.startTicks ?? -1,
    bootId: currentBootId(),
    logFile: '/dev/null',
    ...overrides,
  };
}

describe('pid-file liveness', () => {
  it('recognises a running process by pid and start time', () => {
    expect(isRecordAlive(recordOf(process.pid))).toBe(true);
  });

  it('refuses a pid that was reused by a process started at another time', () => {
    const record = recordOf(process.pid);
    expect(isRecordAlive({ ...record, startTicks: record.startTicks - 1 })).toBe(false);
  });

  it('refuses a record from before the last reboot', () => {
    expect(isRecordAlive(recordOf(process.pid, { bootId: 'another-boot' }))).toBe(false);
  });

  it('sees a process that exited as dead', async () => {
    const child = spawn('sleep', ['10']);
    await once(child, 'spawn');
    const record = recordOf(child.pid as number);
    expect(isRecordAlive(record)).toBe(true);
    child.kill('SIGKILL');
    await once(child, 'exit');
    expect(isRecordAlive(record)).toBe(false);
  });

  it('sees a pid with no process as dead', () => {
    // Above the kernel's pid_max (at most 2^22), so never a live process.
    expect(isRecordAlive(recordOf(4_194_305, { startTicks: 1 }))).toBe(false);
  });
});

describe('run records', () => {
  const runDir = mkdtempSync(join(tmpdir(), 'stack-run-'));
  afterAll(() => rmSync(runDir, { recursive: true, force: true }));

  it('are written, read back and removed per server', () => {
    const record = recordOf(process.pid);
    writeRunRecord(runDir, record);
    expect(readRunRecord(runDir, 'redis')).toEqual(record);
    removeRunRecord(runDir, 'redis');
    expect(readRunRecord(runDir, 'redis')).toBeUndefined();
  });
});

describe('the running units of a run dir', () => {
  const runDir = mkdtempSync(join(tmpdir(), 'stack-run-'));
  afterAll(() => rmSync(runDir, { recursive: true, force: true }));

  it('lists the records whose processes run, by unit name, and reads their memory', () => {
    writeRunRecord(runDir, recordOf(process.pid, { server: 'proxy' }));
    writeRunRecord(runDir, recordOf(process.pid, { server: 'ejabberd-a' }));
    writeRunRecord(runDir, recordOf(process.pid, { server: 'ejabberd-b', startTicks: -1 }));
    expect(runningRecords(runDir).map((record) => record.server)).toEqual(['ejabberd-a', 'proxy']);
    expect(procKiB(process.pid, 'status', 'VmRSS')).toBeGreaterThan(0);
    expect(procKiB(2 ** 22 + 1, 'status', 'VmRSS')).toBeUndefined();
  });
});
