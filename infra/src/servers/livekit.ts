import { join } from 'node:path';
import { LIVEKIT_WEBHOOK_PATH } from '../env-file.js';
import { writeFileAtomic } from '../files.js';
import { httpOk } from '../health.js';
import { REPO_ROOT } from '../paths.js';
import { serverEnv } from '../supervisor.js';
import { renderTemplateFile } from '../template.js';
import { confFileOf, type GoBinary, ownPorts, type ServerDefinition, type StackContext } from './types.js';

const TEMPLATE = join(REPO_ROOT, 'livekit', 'livekit.yaml.template');

const LIVEKIT_BINARY: GoBinary = {
  name: 'livekit-server',
  module: 'github.com/livekit/livekit-server/cmd/server',
  version: 'v1.13.5',
  builtName: 'server',
};

/**
 * The nodes of a cluster share the profile's Redis: it holds which node hosts each room, and carries
 * signalling from the node a participant reached to that one. Its own database number keeps LiveKit's
 * keys apart from the control plane's.
 */
const LIVEKIT_REDIS_DB = 1;

export function renderLivekitConfig(context: StackContext): string {
  const { ports, secrets } = context;
  const own = ownPorts(context);
  const cluster =
    context.instance === undefined
      ? ''
      : `redis:\n  address: 127.0.0.1:${ports.redis}\n  password: ${secrets.redisPassword}\n  db: ${LIVEKIT_REDIS_DB}\n`;
  return renderTemplateFile(TEMPLATE, {
    http_port: own.livekitHttp,
    rtc_tcp_port: own.livekitRtcTcp,
    rtc_udp_port: own.livekitRtcUdp,
    api_key: secrets.livekitApiKey,
    api_secret: secrets.livekitApiSecret,
    webhook_url: `http://127.0.0.1:${ports.controlPlaneInternal}${LIVEKIT_WEBHOOK_PATH}`,
    cluster,
  });
}

function configFile(context: StackContext): string {
  return confFileOf(context, 'livekit.yaml');
}

export const livekit: ServerDefinition = {
  name: 'livekit',
  aptPackages: [],
  goBinary: LIVEKIT_BINARY,
  // The first SIGTERM is a graceful stop (a second one would force it).
  stopSignal: 'SIGTERM',
  ports: ['livekitHttp', 'livekitRtcTcp', 'livekitRtcUdp'],
  replicated: true,
  url: (context) => `ws://127.0.0.1:${ownPorts(context).livekitHttp}`,

  async prepare(context) {
    // Holds the API secret.
    writeFileAtomic(configFile(context), renderLivekitConfig(context));
  },

  launch(context) {
    return {
      command: join(context.paths.binDir, LIVEKIT_BINARY.name),
      args: ['--config', configFile(context)],
      env: serverEnv(),
      cwd: context.paths.profileDir,
    };
  },

  // 200 "OK" once the node is up; 406 while its stats are stale.
  isHealthy: (context) => httpOk(`http://127.0.0.1:${ownPorts(context).livekitHttp}/`),
};
