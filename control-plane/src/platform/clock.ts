/** The one source of time. Production uses the system clock; tests pass a clock they can set. */
export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

export interface ManualClock extends Clock {
  set(at: Date | string): void;
  advance(ms: number): void;
}

export function createManualClock(start: Date | string = '2026-01-01T00:00:00Z'): ManualClock {
  let current = new Date(start).getTime();
  return {
    now: () => new Date(current),
    set: (at) => {
      current = new Date(at).getTime();
    },
    advance: (ms) => {
      current += ms;
    },
  };
}

const DAY_MS = 86_400_000;
/** The last day formatted: a request asks for today several times (caps, counters, usage lines). */
let lastDay = { number: Number.NaN, text: '' };

/** The UTC calendar day of an instant, as YYYY-MM-DD: the unit of daily caps and usage lines. */
export function utcDay(at: Date): string {
  const number = Math.floor(at.getTime() / DAY_MS);
  if (number !== lastDay.number) lastDay = { number, text: at.toISOString().slice(0, 10) };
  return lastDay.text;
}

/** Seconds from `at` until the next UTC midnight (at least 1). */
export function secondsUntilUtcMidnight(at: Date): number {
  const midnight = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1);
  return Math.max(1, Math.ceil((midnight - at.getTime()) / 1000));
}

/** The fixed window of `windowSeconds` an instant falls in: its number, and the seconds left in it (≥ 1). */
export function fixedWindow(now: Date, windowSeconds: number): { index: number; secondsLeft: number } {
  const seconds = now.getTime() / 1000;
  const index = Math.floor(seconds / windowSeconds);
  return { index, secondsLeft: Math.max(1, Math.ceil((index + 1) * windowSeconds - seconds)) };
}
