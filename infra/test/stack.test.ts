import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { tcpListening } from '../src/health.js';
import { stackPaths } from '../src/paths.js';
import { freePort, portBase, portMap } from '../src/ports.js';
import { isRecordAlive, readRunRecord, runningRecords } from '../src/run-records.js';
import { ensureSecrets } from '../src/secrets.js';
import type { ServerDefinition, ServerName, StackContext } from '../src/servers/types.js';
import { down, unitsOf, up } from '../src/stack.js';
import { serverEnv, stopRecorded } from '../src/supervisor.js';

// A state dir of its own: the test stack that may be up on this machine is never touched.
const root = mkdtempSync(join(tmpdir(), 'stack-up-'));
const paths = stackPaths('test', root, join(root, '.stack'));
for (const dir of [paths.runDir, paths.logsDir]) mkdirSync(dir, { recursive: true });
const context: StackContext = {
  profile: 'test',
  paths,
  ports: portMap(portBase('test', {})),
  secrets: ensureSecrets(paths.secretsFile),
};

afterEach(async () => {
  // A failed assertion must not leave a listener behind.
  for (const record of runningRecords(paths.runDir)) await stopRecorded(record, 'SIGKILL', 5_000);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Not one of the bundle's servers: a node process listening on a port, run through the same start path. */
function listener(port: number, afterHealthy?: ServerDefinition['afterHealthy']): ServerDefinition {
  return {
    name: 'listener' as string as ServerName,
    aptPackages: [],
    stopSignal: 'SIGTERM',
    ports: [],
    url: () => `tcp://127.0.0.1:${port}`,
    prepare: async () => {},
    launch: () => ({
      command: process.execPath,
      args: ['-e', `require('node:net').createServer().listen(${port}, '127.0.0.1')`],
      env: serverEnv(),
      cwd: root,
    }),
    isHealthy: () => tcpListening(port),
    afterHealthy,
  };
}

const startedUnits = (server: ServerDefinition, started: readonly string[]) =>
  unitsOf(context, [server]).filter((unit) => started.includes(unit.name));

describe('up', () => {
  it('counts a server it started whose setup then failed as started, so that down stops it', async () => {
    const port = await freePort();
    const server = listener(port, () => Promise.reject(new Error('provisioning failed')));
    const { started, failures } = await up(context, [server]);
    expect(failures.map((failure) => failure.message)).toEqual(['listener: provisioning failed']);
    expect(started).toEqual(['listener']);
    const record = readRunRecord(paths.runDir, 'listener');
    expect(record !== undefined && isRecordAlive(record)).toBe(true);

    await down(context, startedUnits(server, started));
    // Its process is gone (pid and start time). Not its port: beside the other test files, another
    // process may bind a freed port at once.
    expect(record !== undefined && isRecordAlive(record)).toBe(false);
  });

  it('does not count a server it reused as started', async () => {
    const server = listener(await freePort());
    const first = await up(context, [server]);
    expect(first).toEqual({ started: ['listener'], failures: [] });
    const second = await up(context, [server]);
    expect(second).toEqual({ started: [], failures: [] });
    await down(context, startedUnits(server, first.started));
    expect(runningRecords(paths.runDir)).toEqual([]);
  });
});
