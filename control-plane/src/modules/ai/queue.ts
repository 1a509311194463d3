import { errors } from '../../platform/errors.js';

/**
 * Inference on a small machine, fairly shared (in this process): at most `concurrency` calls at the
 * provider at once, at most `waiting` more in line, and no app holding more than `perApp` of the
 * running and waiting places, so that one app cannot starve the others. A call past those limits is
 * a 429 with a retry hint; a call whose client left while it waited leaves the line.
 */
export function createInferenceQueue(limits: { concurrency: number; waiting: number; perApp: number }) {
  let running = 0;
  const line: { appId: string; start: () => void }[] = [];
  const held = new Map<string, number>();
  const hold = (appId: string, delta: number) => {
    const count = (held.get(appId) ?? 0) + delta;
    if (count === 0) held.delete(appId);
    else held.set(appId, count);
  };
  const next = () => {
    const first = line.shift();
    if (first) first.start();
    else running--;
  };
  /** Seconds until a place is likely free: a second a round of calls, at least one. */
  const retryAfter = () => Math.max(1, Math.ceil((line.length + 1) / limits.concurrency));

  return {
    /** Runs `work` when its turn comes; 429 when the line is full or the app holds its share. */
    run: async <T>(appId: string, signal: AbortSignal, work: () => Promise<T>): Promise<T> => {
      if ((held.get(appId) ?? 0) >= limits.perApp)
        throw errors.rateLimited(
          `This app has ${limits.perApp} AI calls running or waiting, its share of the provider: try again shortly`,
          retryAfter(),
        );
      if (running >= limits.concurrency && line.length >= limits.waiting)
        throw errors.rateLimited('The AI provider is busy: try again shortly', retryAfter());
      hold(appId, 1);
      try {
        if (running < limits.concurrency) running++;
        else if (signal.aborted) throw signal.reason;
        else
          await new Promise<void>((start, leave) => {
            const place = { appId, start };
            line.push(place);
            signal.addEventListener(
              'abort',
              () => {
                const at = line.indexOf(place);
                if (at >= 0) line.splice(at, 1);
                leave(signal.reason);
              },
              { once: true },
            );
          });
        try {
          return await work();
        } finally {
          next();
        }
      } finally {
        hold(appId, -1);
      }
    },
    /** Calls running and waiting now (for tests and metrics). */
    load: () => ({ running, waiting: line.length }),
  };
}

export type InferenceQueue = ReturnType<typeof createInferenceQueue>;
