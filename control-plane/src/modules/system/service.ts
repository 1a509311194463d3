import type { Probe } from '../../adapters/probes.js';

/** Runs every probe at once; one that fails or takes over its timeout marks its dependency down. */
export async function checkReadiness(probes: Record<string, Probe>) {
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
