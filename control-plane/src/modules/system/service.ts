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
  let last: { endedAt: number | null; round: ReturnType<typeof checkReadiness> } | undefined;
  return () => {
    // Fresh for a second from when it ended: probes slow to time out (a dependency away) are never
    // run again while a round is still waiting for them.
    if (!last || (last.endedAt !== null && performance.now() - last.endedAt >= HEALTH_FRESH_MS)) {
      const round = { endedAt: null as number | null, round: checkReadiness(probes) };
      void round.round.then(() => {
        round.endedAt = performance.now();
      });
      last = round;
    }
    return last.round;
  };
}
