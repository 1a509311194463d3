import { join } from 'node:path';
import { runChecked } from '../exec.js';
import { writeFileAtomic } from '../files.js';
import { tcpListening } from '../health.js';
import type { PortMap, PortName } from '../ports.js';
import { serverEnv } from '../supervisor.js';
import { type Instance, instancesOf, type ServerDefinition, type StackContext } from './types.js';

const HAPROXY = '/usr/sbin/haproxy';

/** The proxy's frontends: each listens on the profile's port of that name and fronts every instance's. */
const FRONTENDS = [
  'controlPlane',
  'controlPlaneInternal',
  'ejabberdWebSocket',
  'ejabberdApi',
  'ejabberdComponent',
  'livekitHttp',
] as const satisfies readonly PortName[];
type Frontend = (typeof FRONTENDS)[number];

/**
 * An HTTP health check: HTTP/1.1 with a Host header (ejabberd answers HAProxy's default HTTP/1.0
 * check with 400), healthy on 200 only.
 */
function httpCheck(method: 'GET' | 'POST', uri: string, jsonBody?: string): string[] {
  const body = jsonBody === undefined ? '' : ` hdr content-type application/json body "${jsonBody}"`;
  return [
    'option httpchk',
    `http-check send meth ${method} uri ${uri} ver HTTP/1.1 hdr host localhost${body}`,
    'http-check expect status 200',
  ];
}

/**
 * How each backend picks an instance and checks it (a connect check where no HTTP one is given).
 * Only a failed connection is retried on another instance: a request that reached a replica which
 * then died may have been carried out, and resending it could charge twice (idempotency keys make a
 * client's own retry safe).
 */
const BACKENDS: Record<Frontend, { label: string; lines: readonly string[] }> = {
  // /healthz answers 200 whenever the process serves; a replica whose database is down still answers
  // its own 503 (service_unavailable, Retry-After), which the proxy passes on rather than hide.
  // X-Forwarded-For: the control plane's per-address limits (failed keys, the shield) count the client,
  // not the proxy (SVC_TRUST_PROXY names the proxy's address).
  controlPlane: {
    label: 'control_plane',
    lines: ['balance roundrobin', 'option forwardfor', ...httpCheck('GET', '/healthz')],
  },
  // ejabberd's login questions, LiveKit's webhooks and MinIO's bucket events.
  controlPlaneInternal: { label: 'control_plane_internal', lines: ['balance roundrobin'] },
  // Chat sessions are long-lived: leastconn spreads them over the nodes. ejabberd answers a plain
  // GET of its WebSocket path with 200.
  ejabberdWebSocket: { label: 'ejabberd_ws', lines: ['balance leastconn', ...httpCheck('GET', '/ws')] },
  ejabberdApi: {
    label: 'ejabberd_api',
    lines: ['balance roundrobin', ...httpCheck('POST', '/api/status', '{}')],
  },
  // The control plane's external component (XEP-0114), a long-lived TCP stream.
  ejabberdComponent: { label: 'ejabberd_component', lines: ['mode tcp', 'balance leastconn'] },
  // Signalling only: media goes straight to the node hosting the room, on that node's RTC ports.
  livekitHttp: { label: 'livekit', lines: ['balance leastconn', ...httpCheck('GET', '/')] },
};

/** haproxy.cfg for a clustered profile; the instances' ports come from their port blocks. */
export function renderProxyConfig(ports: PortMap, instances: readonly Instance[]): string {
  const sections = FRONTENDS.map((frontend) => {
    const { label, lines } = BACKENDS[frontend];
    const mode = lines.includes('mode tcp') ? ['    mode tcp', '    option tcplog'] : [];
    const servers = instances.map(
      (instance) => `    server ${label}_${instance.name} 127.0.0.1:${instance.ports[frontend]} check`,
    );
    return [
      `frontend ${label}`,
      ...mode,
      `    bind 127.0.0.1:${ports[frontend]}`,
      `    default_backend ${label}`,
      `backend ${label}`,
      ...lines.map((line) => `    ${line}`),
      ...servers,
    ].join('\n');
  });
  return `# Rendered by infra/src/servers/proxy.ts on every start; edits are overwritten.
global
    # Its log is its stdout, which the runner keeps in logs/proxy.log.
    log stdout format raw local0 info
    # Each connection takes two descriptors: this fits the default open-file limit of 20,000 or more.
    maxconn 8000
defaults
    mode http
    log global
    option httplog
    option dontlog-normal
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    # A WebSocket or the component stream, once established: idle chat sessions ping well within it.
    timeout tunnel 1h
    # A dead instance is out of rotation after two failed checks a second apart.
    default-server inter 1s fall 2 rise 2
    retries 3
    retry-on conn-failure
    option redispatch
${sections.join('\n')}
`;
}

function configFile(context: StackContext): string {
  return join(context.paths.confDir, 'haproxy.cfg');
}

/** HAProxy (Debian's package) in front of the replicated servers of a clustered profile. */
export const proxy: ServerDefinition = {
  name: 'proxy',
  aptPackages: ['haproxy'],
  osUser: 'haproxy',
  clusterOnly: true,
  // A hard stop: the instances behind it are stopped too when the stack goes down.
  stopSignal: 'SIGTERM',
  ports: FRONTENDS,
  url: ({ ports }) => `http://127.0.0.1:${ports.controlPlane}`,

  async prepare(context, user) {
    const config = renderProxyConfig(context.ports, instancesOf(context.profile));
    writeFileAtomic(configFile(context), config, user, 0o640);
    await runChecked('checking the proxy config', HAPROXY, ['-c', '-q', '-f', configFile(context)]);
  },

  launch(context) {
    return {
      command: HAPROXY,
      // -db: in the foreground, so the runner supervises it like every server.
      args: ['-db', '-f', configFile(context)],
      env: serverEnv(),
      cwd: context.paths.profileDir,
    };
  },

  isHealthy: async ({ ports }) =>
    (await Promise.all(FRONTENDS.map((frontend) => tcpListening(ports[frontend])))).every(Boolean),
};
