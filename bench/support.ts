import { randomInt } from 'node:crypto';
import type { App } from '../control-plane/src/app.js';
import { loadProfileEnv } from '../infra/src/env-file.js';
import type { Profile } from '../infra/src/profile.js';
import { type Cpu, cpuMeter, noCpu } from './cpu.js';

/** A stack's settings as the bench's environment: `npm run stack -- up --profile <profile>` first. */
export function useStackSettings(profile: Profile): void {
  Object.assign(process.env, loadProfileEnv(profile), { SVC_LOG_LEVEL: 'silent' });
}

/** Benchmarks run against the test stack: `npm run stack -- up --profile test` first. */
export function useTestStackSettings(): void {
  useStackSettings('test');
}

/** Runs `task` `total` times with `concurrency` in flight; returns each run's latency in ms. */
export async function runConcurrently(
  total: number,
  concurrency: number,
  task: () => Promise<void>,
): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < total) {
      next += 1;
      const started = performance.now();
      await task();
      latencies.push(performance.now() - started);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return latencies;
}

export function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** One measured run: how long it took and each call's latency in ms. */
export interface Run {
  elapsed: number;
  latencies: number[];
}

export interface Percentiles {
  p50: number;
  p95: number;
  p99: number;
}

export interface Figures extends Percentiles {
  perSecond: number;
}

/** Runs `task` `count` times with `concurrency` in flight, timed as a whole. */
export async function timed(count: number, concurrency: number, task: () => Promise<unknown>): Promise<Run> {
  const started = performance.now();
  const latencies = await runConcurrently(count, concurrency, async () => void (await task()));
  return { elapsed: performance.now() - started, latencies };
}

/** A path's runs taken in turns, and the CPU they took. */
export interface Turns {
  runs: Run[];
  cpu: Cpu;
}

/**
 * Paths measured in turns, one run of each a round (`round` names which), the order reversed every
 * other round, so that the drift of a shared machine hits them alike; each path's runs and the CPU
 * spent while they ran. Warm them up first: every round counts.
 */
export async function inTurns<Name extends string>(
  paths: Record<Name, (round: number) => Promise<Run>>,
  rounds: number,
): Promise<Record<Name, Turns>> {
  const { charged } = cpuMeter();
  const names = Object.keys(paths) as Name[];
  const taken = {} as Record<Name, Turns>;
  for (const name of names) taken[name] = { runs: [], cpu: noCpu() };
  for (let round = 0; round < rounds; round += 1)
    for (const name of round % 2 === 0 ? names : [...names].reverse())
      taken[name].runs.push(await charged(taken[name].cpu, () => paths[name](round)));
  return taken;
}

export function percentiles(latencies: number[]): Percentiles {
  const sorted = [...latencies].sort((a, b) => a - b);
  return { p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99) };
}

/** Throughput and latency over runs taken in turns with another path's. */
export function figures(runs: Run[]): Figures {
  const latencies = runs.flatMap((run) => run.latencies);
  const elapsed = runs.reduce((sum, run) => sum + run.elapsed, 0);
  return { perSecond: (latencies.length / elapsed) * 1000, ...percentiles(latencies) };
}

/**
 * The throughput ratio of a path to its floor in each round they took in turns (runs of the same
 * number of calls): their median and spread. One round that a burst of other work on the machine
 * hit sways a ratio of totals; the median of the rounds is what the path does most of the time.
 */
export function roundRatios(
  pathRuns: Run[],
  floorRuns: Run[],
): { median: number; low: number; high: number } {
  const ratios = pathRuns.map((run, round) => floorRuns[round]!.elapsed / run.elapsed).sort((a, b) => a - b);
  const middle = ratios.length / 2;
  const median =
    ratios.length % 2 === 1 ? ratios[Math.floor(middle)]! : (ratios[middle - 1]! + ratios[middle]!) / 2;
  return { median, low: ratios[0]!, high: ratios[ratios.length - 1]! };
}

/** One line of figures: throughput and latency percentiles. */
export function report(label: string, latencies: number[], elapsedMs: number): string {
  const sorted = [...latencies].sort((a, b) => a - b);
  const perSecond = (latencies.length / elapsedMs) * 1000;
  return `${label}: ${latencies.length} calls in ${(elapsedMs / 1000).toFixed(2)} s = ${perSecond.toFixed(0)}/s, p50 ${percentile(sorted, 50).toFixed(2)} ms, p99 ${percentile(sorted, 99).toFixed(2)} ms`;
}

/** Seconds since a `performance.now()`, for progress lines. */
export const secondsSince = (since: number) => ((performance.now() - since) / 1000).toFixed(1);

const ms = (value: number) => `${value.toFixed(2).padStart(7)} ms`;
export const latencyLine = (f: Percentiles) => `p50 ${ms(f.p50)}  p95 ${ms(f.p95)}  p99 ${ms(f.p99)}`;

/** Whether a latency goal is met, as a line under the figures. */
export const p95Goal = (f: Figures, p95Below: number) =>
  `    goal p95 < ${p95Below} ms: ${f.p95 < p95Below ? 'met' : 'NOT met'}`;

/**
 * Each task `count` times with one call in flight, one task after the other: what a caller waits for
 * when the server is not saturated. With many in flight on a machine of a few cores, a call's latency
 * is mostly its wait behind the others (Little's law: in flight / throughput), so figures at that load
 * say more about throughput.
 */
export async function oneAtATime<Label extends string>(
  count: number,
  tasks: readonly (readonly [Label, () => Promise<unknown>])[],
): Promise<[Label, Figures][]> {
  const measured: [Label, Figures][] = [];
  for (const [label, task] of tasks) measured.push([label, figures([await timed(count, 1, task)])]);
  return measured;
}

/** A call through the app from an address of its own; anything but a success ends the bench. */
export async function injectOk(
  app: App,
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: string,
  headers: Record<string, string>,
  payload?: object,
) {
  const response = await app.inject({
    method,
    url,
    headers,
    remoteAddress: `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`,
    ...(payload ? { payload } : {}),
  });
  if (response.statusCode >= 300)
    throw new Error(`${method} ${url}: ${response.statusCode} ${response.body}`);
  return response;
}
