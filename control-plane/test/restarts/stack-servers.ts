import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { stackProfile } from '../support.js';

const run = promisify(execFile);
const ROOT = new URL('../../../', import.meta.url);

/** The stack's servers, as the stack runner names them. */
export type StackServer = 'postgres' | 'redis' | 'ejabberd' | 'livekit' | 'minio' | 'control-plane';

/**
 * Stops (`down`) or starts (`up`, which returns once the server is healthy) one server of the stack
 * the tests drive: every instance of it in the scale profile (`up` starts only the missing ones).
 */
export async function stackServer(command: 'down' | 'up', server: StackServer): Promise<void> {
  await run('node', ['infra/bootstrap.mjs', command, '--profile', stackProfile(), '--only', server], {
    cwd: ROOT,
    env: process.env,
  });
}
