import type { Probe } from '../../adapters/probes.js';

/** Runs every probe at once; one that fails or takes over its timeout marks its dependency down. */
async function checkReadiness(probes: Record<string, Probe>) {
  const names = Object.keys(probes);
  const results = await Promise.allSettled(names.map((name) => probes[name]!()));
  const checks = Object.fromEntries(
    names.map((name, i) => [name, results[i]!.status === 'fulfilled' ? ('ok' as const) : ('down' as const)]),
  );
  const failures = names.flatMap((name, i) => {
    const result = results[i]!;
    return result.status === 'rejected' ? [{ name, reason: String(result.reason) }] : [];
  });
  return { ready: failures.length === 0, checks, failures };
}

/**
 * How long one round of probes answers /healthz and /readyz: public, so a poller or a flood asking
 * often costs one round a second (a query, a ping and a call to each bundled server).
 */
const HEALTH_FRESH_MS = 1_000;

/**
 * The dependencies' states for /healthz and /readyz, probed at most once per HEALTH_FRESH_MS however
 * often and however concurrently they are asked (callers share the round in flight).
 */
export function watchDependencies(probes: Record<string, Probe>) {
  let last: { at: number; round: ReturnType<typeof checkReadiness> } | undefined;
  return () => {
    const now = performance.now();
    if (!last || now - last.at >= HEALTH_FRESH_MS) last = { at: now, round: checkReadiness(probes) };
    return last.round;
  };
}
