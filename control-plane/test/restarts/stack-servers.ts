import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = new URL('../../../', import.meta.url);

/** The test stack's servers, as the stack runner names them. */
export type StackServer = 'postgres' | 'redis' | 'ejabberd' | 'livekit' | 'minio' | 'control-plane';

/** Stops (`down`) or starts (`up`, which returns once the server is healthy) one server of the test stack. */
export async function stackServer(command: 'down' | 'up', server: StackServer): Promise<void> {
  await run('node', ['infra/bootstrap.mjs', command, '--profile', 'test', '--only', server], {
    cwd: ROOT,
    env: process.env,
  });
}
