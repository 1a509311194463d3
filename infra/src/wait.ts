import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls until check() is true (returns true) or the time is up (returns false). A check that
 * throws ends the wait at once with its error: that is how a server that died stops the wait.
 */
export async function waitUntil(
  check: () => boolean | Promise<boolean>,
  timeoutMs: number,
  intervalMs = 200,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(Math.min(intervalMs, Math.max(0, deadline - Date.now())));
  }
}
