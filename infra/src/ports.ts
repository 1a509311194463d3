import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { type AddressInfo, createServer } from 'node:net';
import { StackError, UsageError } from './errors.js';
import { type Profile, REPLICAS } from './profile.js';

/** Every port of a profile is its base plus a fixed offset, so one number moves the whole block. */
export const PORTS = {
  controlPlane: { offset: 0, protocol: 'tcp', label: 'control plane HTTP' },
  postgres: { offset: 1, protocol: 'tcp', label: 'PostgreSQL' },
  redis: { offset: 2, protocol: 'tcp', label: 'Redis' },
  ejabberdWebSocket: { offset: 3, protocol: 'tcp', label: 'ejabberd WebSocket /ws' },
  ejabberdApi: { offset: 4, protocol: 'tcp', label: 'ejabberd HTTP API /api' },
  livekitHttp: { offset: 5, protocol: 'tcp', label: 'LiveKit HTTP/WebSocket signalling' },
  livekitRtcTcp: { offset: 6, protocol: 'tcp', label: 'LiveKit RTC TCP' },
  livekitRtcUdp: { offset: 7, protocol: 'udp', label: 'LiveKit RTC UDP' },
  minioS3: { offset: 8, protocol: 'tcp', label: 'MinIO S3' },
  minioConsole: { offset: 9, protocol: 'tcp', label: 'MinIO console' },
  ejabberdDistribution: { offset: 10, protocol: 'tcp', label: 'ejabberd Erlang distribution' },
  controlPlaneInternal: { offset: 11, protocol: 'tcp', label: 'control plane internal (callbacks, metrics)' },
  ejabberdComponent: { offset: 12, protocol: 'tcp', label: 'ejabberd external component (XEP-0114)' },
  aiLlm: { offset: 13, protocol: 'tcp', label: 'AI provider (llama.cpp server, /v1/chat/completions)' },
  aiModeration: { offset: 14, protocol: 'tcp', label: 'AI provider moderation (/v1/moderations)' },
} as const;

export type PortName = keyof typeof PORTS;
export type PortMap = Readonly<Record<PortName, number>>;

/**
 * Below Linux's ephemeral range (32768-60999 by default): there, any outgoing connection may hold one
 * of the stack's ports at the moment its server starts.
 */
const DEFAULT_PORT_BASE: Record<Profile, number> = { dev: 27000, test: 28000, scale: 29000 };
const HIGHEST_OFFSET = Math.max(...Object.values(PORTS).map((port) => port.offset));
/**
 * In a clustered profile the base block holds what clients reach (the proxy's frontends and the
 * unreplicated servers); instance i of a replicated server listens in the block at base + STRIDE*(i+1).
 */
export const INSTANCE_PORT_STRIDE = 20;

/** The last port a profile uses, relative to its base. */
function portSpan(profile: Profile): number {
  return INSTANCE_PORT_STRIDE * REPLICAS[profile].length + HIGHEST_OFFSET;
}

/** The profile's first port; SVC_STACK_PORT_BASE moves the whole block, e.g. when 27000 is taken. */
export function portBase(profile: Profile, env: NodeJS.ProcessEnv = process.env): number {
  const override = env.SVC_STACK_PORT_BASE;
  if (override === undefined || override === '') return DEFAULT_PORT_BASE[profile];
  const base = Number(override);
  if (!Number.isInteger(base) || base < 1024 || base + portSpan(profile) > 65535)
    throw new UsageError(
      `SVC_STACK_PORT_BASE must be a whole number from 1024 to ${65535 - portSpan(profile)}, got "${override}"`,
    );
  return base;
}

export function portMap(base: number): PortMap {
  return Object.fromEntries(
    Object.entries(PORTS).map(([name, { offset }]) => [name, base + offset]),
  ) as Record<PortName, number>;
}

/** The own ports of instance `index` (0 for "a") of a replicated server. */
export function instancePortMap(base: number, index: number): PortMap {
  return portMap(base + INSTANCE_PORT_STRIDE * (index + 1));
}

/** A loopback port the kernel says is free right now (bound for an instant, then released). */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  server.close();
  await once(server, 'close');
  return port;
}

/** Binds the port on 127.0.0.1 for an instant: the only reliable test that a server could bind it. */
function canBind(port: number, protocol: 'tcp' | 'udp'): Promise<boolean> {
  return new Promise((resolve) => {
    if (protocol === 'udp') {
      const socket = createSocket('udp4');
      socket.once('error', () => resolve(false));
      socket.bind(port, '127.0.0.1', () => socket.close(() => resolve(true)));
      return;
    }
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * Fails before a server is spawned when one of its ports is taken, naming the port: clearer than
 * the server's own bind error buried in its log, and it never leaves a half-started server behind.
 */
export async function assertPortsFree(names: readonly PortName[], ports: PortMap): Promise<void> {
  const taken: string[] = [];
  for (const name of names) {
    const { protocol, label } = PORTS[name];
    if (!(await canBind(ports[name], protocol))) taken.push(`${ports[name]}/${protocol} (${label})`);
  }
  if (taken.length > 0)
    throw new StackError(
      `port ${taken.join(', ')} on 127.0.0.1 is already in use by another process. ` +
        `Stop that process, or move this profile's ports with SVC_STACK_PORT_BASE.`,
    );
}
