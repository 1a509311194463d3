import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Retries `attempt` through an outage, as a careful client does, until it answers (anything but
 * undefined): a thrown network error and an undefined answer (a 5xx, a 409 saying the request's
 * Idempotency-Key is still held) are both "try again" until `settleMs` have passed.
 */
export async function untilDone<T>(
  what: string,
  attempt: () => Promise<T | undefined>,
  settleMs: number,
): Promise<{ result: T; tries: number }> {
  const deadline = Date.now() + settleMs;
  let last: unknown;
  for (let tries = 1; ; tries += 1) {
    const result = await attempt().catch((error: unknown) => {
      last = error;
      return undefined;
    });
    if (result !== undefined) return { result, tries };
    if (Date.now() > deadline)
      throw new Error(`${what}: still failing after ${settleMs} ms (${String(last)})`);
    await sleep(200);
  }
}
