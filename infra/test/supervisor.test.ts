import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isRecordAlive, readProcStat, readRunRecord } from '../src/run-records.js';
import { START_MARKER, serverEnv, startDetached, stopRecorded } from '../src/supervisor.js';

const dir = mkdtempSync(join(tmpdir(), 'stack-supervisor-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function startShell(server: string, script: string) {
  return startDetached(
    { command: 'sh', args: ['-c', script], env: serverEnv(), cwd: dir },
    { server, logFile: join(dir, `${server}.log`), runDir: dir, user: undefined },
  );
}

describe('detached servers', () => {
  it('are recorded, log to their file after a start marker, and stop on their signal', async () => {
    const { record } = await startShell('echo', 'echo ready; exec sleep 30');
    expect(readRunRecord(dir, 'echo')).toEqual(record);
    expect(isRecordAlive(record)).toBe(true);
    await expect.poll(() => readFileSync(record.logFile, 'utf8')).toContain('ready');
    expect(readFileSync(record.logFile, 'utf8')).toContain(START_MARKER);
    expect(await stopRecorded(record, 'SIGTERM', 5_000)).toBe('stopped');
    expect(isRecordAlive(record)).toBe(false);
  });

  it('are killed with their whole process group when they ignore the stop signal', async () => {
    const { record } = await startShell('stubborn', 'trap \'\' TERM; sleep 30 & echo "helper $!"; wait');
    await expect.poll(() => readFileSync(record.logFile, 'utf8')).toMatch(/helper \d+/);
    const helper = Number(/helper (\d+)/.exec(readFileSync(record.logFile, 'utf8'))?.[1]);
    expect(await stopRecorded(record, 'SIGTERM', 300)).toBe('killed');
    // Dead, or a zombie waiting for init to reap it.
    await expect.poll(() => readProcStat(helper)?.state ?? 'gone').toMatch(/^(gone|Z)$/);
  });

  it('report the exit of one that dies at once', async () => {
    const { exited } = await startShell('failing', 'exit 3');
    expect(await exited).toBe(3);
  });
});
