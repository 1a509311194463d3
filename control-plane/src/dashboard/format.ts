import { formatUsd } from '../platform/money.js';

/** Dollars from micro-dollars, as a person reads them: $1,234.50 (to the micro-dollar when it has them). */
export function usd(micros: number): string {
  const [whole = '0', fraction = ''] = formatUsd(Math.abs(micros)).split('.');
  const cents = fraction.replace(/0+$/, '').padEnd(2, '0');
  return `${micros < 0 ? '−' : ''}$${Number(whole).toLocaleString('en-US')}.${cents}`;
}

/** A UTC time as `2026-11-24 12:05 UTC`. */
export const when = (at: Date | null | undefined, never = 'never') =>
  at ? `${at.toISOString().slice(0, 16).replace('T', ' ')} UTC` : never;
