/** Money is an integer count of micro-dollars (1 USD = 1,000,000) everywhere inside the service. */
export const MICROS_PER_USD = 1_000_000;

/** Formats micro-dollars as a decimal USD string with six places, e.g. 1500 -> "0.001500". */
export function formatUsd(micros: number): string {
  if (!Number.isSafeInteger(micros))
    throw new RangeError(`not an integer amount of micro-dollars: ${micros}`);
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const whole = Math.floor(abs / MICROS_PER_USD);
  const fraction = String(abs % MICROS_PER_USD).padStart(6, '0');
  return `${sign}${whole}.${fraction}`;
}

/** Parses a decimal USD string ("10", "0.25", "3.000001") into micro-dollars without floats. */
export function parseUsd(text: string): number {
  const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(text.trim());
  if (!match) throw new RangeError(`not a USD amount with at most 6 decimals: "${text}"`);
  const whole = Number(match[1]);
  const fraction = Number((match[2] ?? '').padEnd(6, '0'));
  return whole * MICROS_PER_USD + fraction;
}
