import { expect } from 'vitest';
import type { LiveParticipant } from './livekit.js';
import { api, type Customer } from './stack.js';

export interface LiveToken {
  url: string;
  token: string;
  room: string;
  expires_in: number;
}

export interface TokenRequest {
  room: string;
  identity: string;
  kind?: 'live' | 'call' | 'audio';
  publish?: boolean;
  quality?: 'hd' | 'fhd' | '4k';
}

/** The fields of a usage row these tests read: billable_quantity is in minutes past the allowance. */
export interface UsageRow {
  product: string;
  metric: string;
  billable_quantity: number;
  cost_micros: number;
}

/** Webhooks are asynchronous: how long usage may take to show a session. */
const METERING_WAIT_MS = 15_000;

/** A live token minted by the running control plane. */
export async function mint(customer: Customer, request: TokenRequest): Promise<LiveToken> {
  const response = await api<LiveToken>(customer, 'POST', '/v1/realtime/live/tokens', request);
  expect(response.status).toBe(200);
  return response.body;
}

/**
 * The seconds the control plane may bill for these participants. LiveKit counts from when a
 * participant became active (just before its join resolves here) to its leave webhook's createdAt,
 * which is in whole seconds, and the control plane rounds each session up to the second.
 */
export function billableRange(present: LiveParticipant[]) {
  const seconds = present.map((participant) => (participant.leftAt! - participant.joinedAt) / 1000);
  const total = seconds.reduce((sum, s) => sum + s, 0);
  return { low: Math.max(1, total - present.length), high: total + 2 * present.length };
}

export async function usageReport(customer: Customer) {
  const report = await api<{ usage: UsageRow[]; total: { cost_micros: number } }>(
    customer,
    'GET',
    '/v1/realtime/usage?days=1',
  );
  expect(report.status).toBe(200);
  return report.body;
}

const billedSeconds = (row: UsageRow | undefined) => Math.round((row?.billable_quantity ?? 0) * 60);

/**
 * Polls the usage report until the metric's row bills at least `low` seconds and then holds still
 * for a poll: each participant's leave is a webhook of its own, metered when it arrives.
 */
export async function settledUsage(customer: Customer, product: string, metric: string, low: number) {
  const deadline = Date.now() + METERING_WAIT_MS;
  let previous: number | undefined;
  for (;;) {
    const report = await usageReport(customer);
    const row = report.usage.find((r) => r.product === product && r.metric === metric);
    const seconds = billedSeconds(row);
    if ((seconds >= low && seconds === previous) || Date.now() > deadline) return { row, seconds, report };
    previous = seconds >= low ? seconds : undefined;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** The metric's row bills the participants' presence at its price: floor(seconds × price / 60). */
export async function expectBilled(
  customer: Customer,
  product: string,
  metric: string,
  priceMicros: number,
  present: LiveParticipant[],
) {
  const expected = billableRange(present);
  const billed = await settledUsage(customer, product, metric, expected.low);
  expect(billed.seconds).toBeGreaterThanOrEqual(expected.low);
  expect(billed.seconds).toBeLessThanOrEqual(expected.high);
  expect(billed.row!.cost_micros).toBe(Math.floor((billed.seconds * priceMicros) / 60));
  return billed;
}
