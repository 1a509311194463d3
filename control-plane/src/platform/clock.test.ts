import { describe, expect, it } from 'vitest';
import { createManualClock, secondsUntilUtcMidnight, utcDay } from './clock.js';

describe('clock', () => {
  it('is settable and advances only when told', () => {
    const clock = createManualClock('2026-05-01T12:00:00Z');
    expect(clock.now().toISOString()).toBe('2026-05-01T12:00:00.000Z');
    clock.advance(1_500);
    expect(clock.now().toISOString()).toBe('2026-05-01T12:00:01.500Z');
    clock.set('2027-01-01T00:00:00Z');
    expect(clock.now().toISOString()).toBe('2027-01-01T00:00:00.000Z');
  });

  it('names the UTC day whatever the local offset', () => {
    expect(utcDay(new Date('2026-05-01T23:59:59.999Z'))).toBe('2026-05-01');
    expect(utcDay(new Date('2026-05-02T01:00:00+02:00'))).toBe('2026-05-01');
    // Across midnight and back, and before 1970 (negative instants round down too).
    expect(utcDay(new Date('2026-05-02T00:00:00.000Z'))).toBe('2026-05-02');
    expect(utcDay(new Date('2026-05-01T00:00:00.000Z'))).toBe('2026-05-01');
    expect(utcDay(new Date('1969-12-31T23:59:59.999Z'))).toBe('1969-12-31');
  });

  it('counts seconds to the next UTC midnight, never zero', () => {
    expect(secondsUntilUtcMidnight(new Date('2026-05-01T23:58:00Z'))).toBe(120);
    expect(secondsUntilUtcMidnight(new Date('2026-05-01T00:00:00Z'))).toBe(86_400);
    expect(secondsUntilUtcMidnight(new Date('2026-05-01T23:59:59.999Z'))).toBe(1);
  });
});
