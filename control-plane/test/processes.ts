import { type ChildProcess, spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';

const MAIN = new URL('../src/main.ts', import.meta.url).pathname;

/**
 * A control-plane process of the test's own on these ports, resolved once /healthz answers. node
 * itself runs it, not the tsx wrapper, so that a signal (SIGKILL, SIGTERM) reaches it directly.
 */
export async function startControlPlaneProcess(port: number, internalPort: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
    env: { ...process.env, SVC_PORT: String(port), SVC_INTERNAL_PORT: String(internalPort) },
    stdio: 'ignore',
  });
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const healthy = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (response) => response.ok,
      () => false,
    );
    if (healthy) return child;
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error('the control plane never became healthy');
}
