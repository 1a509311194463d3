import { join } from 'node:path';
import { LIVEKIT_WEBHOOK_PATH } from '../env-file.js';
import { writeFileAtomic } from '../files.js';
import { httpOk } from '../health.js';
import { REPO_ROOT } from '../paths.js';
import type { PortMap } from '../ports.js';
import type { StackSecrets } from '../secrets.js';
import { serverEnv } from '../supervisor.js';
import { renderTemplateFile } from '../template.js';
import type { GoBinary, ServerDefinition, StackContext } from './types.js';

const TEMPLATE = join(REPO_ROOT, 'livekit', 'livekit.yaml.template');

const LIVEKIT_BINARY: GoBinary = {
  name: 'livekit-server',
  module: 'github.com/livekit/livekit-server/cmd/server',
  version: 'v1.13.5',
  builtName: 'server',
};

export function renderLivekitConfig(ports: PortMap, secrets: StackSecrets): string {
  return renderTemplateFile(TEMPLATE, {
    http_port: ports.livekitHttp,
    rtc_tcp_port: ports.livekitRtcTcp,
    rtc_udp_port: ports.livekitRtcUdp,
    api_key: secrets.livekitApiKey,
    api_secret: secrets.livekitApiSecret,
    webhook_url: `http://127.0.0.1:${ports.controlPlaneInternal}${LIVEKIT_WEBHOOK_PATH}`,
  });
}

function configFile(context: StackContext): string {
  return join(context.paths.confDir, 'livekit.yaml');
}

export const livekit: ServerDefinition = {
  name: 'livekit',
  aptPackages: [],
  goBinary: LIVEKIT_BINARY,
  // The first SIGTERM is a graceful stop (a second one would force it).
  stopSignal: 'SIGTERM',
  ports: ['livekitHttp', 'livekitRtcTcp', 'livekitRtcUdp'],
  url: ({ ports }) => `ws://127.0.0.1:${ports.livekitHttp}`,

  async prepare(context) {
    // Holds the API secret.
    writeFileAtomic(configFile(context), renderLivekitConfig(context.ports, context.secrets));
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
  isHealthy: ({ ports }) => httpOk(`http://127.0.0.1:${ports.livekitHttp}/`),
};
