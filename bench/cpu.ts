import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { stackPaths } from '../infra/src/paths.js';
import type { Profile } from '../infra/src/profile.js';
import { readRunRecord } from '../infra/src/run-records.js';

/**
 * Who spent the CPU of a measured run: this process, the tools it ran, each server of the stack with
 * its children (PostgreSQL's backends), and the whole machine, read from /proc. A ratio of throughput
 * says how far a path is from its floor; these say where the difference went.
 */

const TICK_MS = 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));

/** Fields of /proc/<pid>/stat after the command name: [state, ppid, …]; undefined when gone. */
function statFields(pid: number | string): string[] | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text.slice(text.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}
/** utime + stime, and cutime + cstime (children waited for), in ticks. */
const own = (fields: string[]) => Number(fields[11]) + Number(fields[12]);
const reaped = (fields: string[]) => Number(fields[13]) + Number(fields[14]);

const SERVERS = ['postgres', 'minio', 'redis', 'ejabberd'] as const;
type Server = (typeof SERVERS)[number];

export interface Cpu {
  node: number;
  tools: number;
  postgres: number;
  minio: number;
  redis: number;
  ejabberd: number;
  machine: number;
}

export const noCpu = (): Cpu => ({
  node: 0,
  tools: 0,
  postgres: 0,
  minio: 0,
  redis: 0,
  ejabberd: 0,
  machine: 0,
});

/** CPU accounting against one stack's servers. */
export function cpuMeter(profile: Profile = 'test') {
  const stackPids = new Map<number, Server>();
  for (const server of SERVERS) {
    const pid = readRunRecord(stackPaths(profile).runDir, server)?.pid;
    if (pid !== undefined) stackPids.set(pid, server);
  }

  /** CPU so far, in ms. */
  function now(): Cpu {
    const self = statFields('self')!;
    const byServer: Record<Server, number> = { postgres: 0, minio: 0, redis: 0, ejabberd: 0 };
    for (const [pid, server] of stackPids) {
      const fields = statFields(pid);
      if (fields) byServer[server] += own(fields) + reaped(fields);
    }
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      const fields = statFields(entry);
      const server = fields && stackPids.get(Number(fields[1]));
      if (fields && server) byServer[server] += own(fields) + reaped(fields);
    }
    const [, ...times] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).map(Number);
    const total = times.slice(0, 8).reduce((sum, value) => sum + value, 0);
    const idle = (times[3] ?? 0) + (times[4] ?? 0);
    return {
      node: own(self) * TICK_MS,
      tools: reaped(self) * TICK_MS,
      postgres: byServer.postgres * TICK_MS,
      minio: byServer.minio * TICK_MS,
      redis: byServer.redis * TICK_MS,
      ejabberd: byServer.ejabberd * TICK_MS,
      machine: (total - idle) * TICK_MS,
    };
  }

  return {
    /** A measured run that also adds the CPU spent meanwhile to `spent`. */
    async charged<R>(spent: Cpu, run: () => Promise<R>): Promise<R> {
      const before = now();
      const result = await run();
      const after = now();
      for (const key of Object.keys(spent) as (keyof Cpu)[]) spent[key] += after[key] - before[key];
      return result;
    },
  };
}

/**
 * CPU ms per call, by whom (a process that spent nothing is left out); "other" is the rest of the
 * machine (other tenants included).
 */
export function cpuLine(spent: Cpu, count: number, digits = 0) {
  const per = (value: number) => (value / count).toFixed(digits).padStart(4);
  const other =
    spent.machine - spent.node - spent.tools - spent.postgres - spent.minio - spent.redis - spent.ejabberd;
  const parts = [
    ['node', spent.node],
    ['ffprobe+ffmpeg', spent.tools],
    ['postgres', spent.postgres],
    ['minio', spent.minio],
    ['redis', spent.redis],
    ['ejabberd', spent.ejabberd],
  ].filter(([, value]) => value !== 0);
  return `      CPU ms a call: ${parts.map(([name, value]) => `${name} ${per(value as number)}`).join(', ')}, other ${per(other)}; machine ${per(spent.machine)}`;
}
