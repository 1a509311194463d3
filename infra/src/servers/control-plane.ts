import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { controlPlaneSettings, FFPROBE_BUILD } from '../env-file.js';
import { StackError } from '../errors.js';
import { runChecked } from '../exec.js';
import { httpOk } from '../health.js';
import { REPO_ROOT } from '../paths.js';
import { ownPorts, type ServerDefinition } from './types.js';

/**
 * The control plane's V8 heap limit, MiB. Its live heap under the soak's load is about 125 MiB; with
 * V8's default limit (a quarter of the machine's memory) the heap grew to 460 MiB between full
 * collections and RSS saw-toothed between 320 and 600 MiB, and with this one it stays near 250 MiB
 * at the same throughput. Predictable memory is what a container limit needs.
 */
export const CONTROL_PLANE_HEAP_MIB = 256;

/** The heap limit first, so that one in the operator's own NODE_OPTIONS (read later) wins. */
export function withHeapLimit(nodeOptions: string | undefined): string {
  return [`--max-old-space-size=${CONTROL_PLANE_HEAP_MIB}`, nodeOptions].filter(Boolean).join(' ');
}

/** Where the proxy connects to the replicas from. */
const PROXY_ADDRESS = '127.0.0.1';

let build: Promise<void> | undefined;

/** One build per runner, however many replicas it starts at once (they would overwrite each other's dist). */
function buildOnce(root: string): Promise<void> {
  build ??= (async () => {
    await runChecked('building the control plane', 'npm', ['run', 'build', '-w', 'control-plane'], {
      cwd: root,
    });
    if (!existsSync(join(root, 'control-plane', 'dist', 'main.js')))
      throw new StackError('control-plane/dist/main.js is missing after "npm run build -w control-plane"');
  })();
  return build;
}

/** What infra/media/build-ffprobe.sh needs (the image's ffprobe stage installs the same). */
const FFPROBE_BUILD_PACKAGES = [
  'gcc',
  'libc6-dev',
  'make',
  'pkg-config',
  'curl',
  'xz-utils',
  'zlib1g-dev',
  'libgnutls28-dev',
];

export const controlPlane: ServerDefinition = {
  name: 'control-plane',
  // ffmpeg makes thumbnails; ffprobe is built small, with the build's tools and headers.
  aptPackages: ['ffmpeg', ...FFPROBE_BUILD_PACKAGES],
  scriptBuild: {
    name: FFPROBE_BUILD,
    script: join(REPO_ROOT, 'infra', 'media', 'build-ffprobe.sh'),
    takes: 'a cold build takes one to two minutes',
  },
  // Its grace period for in-flight requests runs on SIGTERM.
  stopSignal: 'SIGTERM',
  ports: ['controlPlane', 'controlPlaneInternal'],
  // Stateless: every replica serves any request.
  replicated: true,
  url: (context) => `http://127.0.0.1:${ownPorts(context).controlPlane}`,

  prepare: ({ paths }) => buildOnce(paths.root),

  launch(context) {
    const { paths, ports, secrets } = context;
    const own = ownPorts(context);
    return {
      command: process.execPath,
      args: [join(paths.root, 'control-plane', 'dist', 'main.js')],
      // The operator's environment too (NODE_OPTIONS, proxies): it is our own process, as our user.
      env: {
        ...process.env,
        NODE_OPTIONS: withHeapLimit(process.env.NODE_OPTIONS),
        // Reached at the profile's URLs (a cluster's proxy), listening on its own ports.
        ...controlPlaneSettings(ports, secrets),
        SVC_PORT: String(own.controlPlane),
        SVC_INTERNAL_PORT: String(own.controlPlaneInternal),
        // A replica's callers come through the proxy, which names them in X-Forwarded-For.
        ...(context.instance === undefined ? {} : { SVC_TRUST_PROXY: PROXY_ADDRESS }),
      },
      cwd: paths.root,
    };
  },

  // Ready means migrations ran and its dependencies answer; a replica, also that the proxy has one in
  // rotation (it counts two passed checks a second apart), so that clients can be told to go ahead.
  isHealthy: async (context) =>
    (await httpOk(`http://127.0.0.1:${ownPorts(context).controlPlane}/readyz`)) &&
    (context.instance === undefined ||
      (await httpOk(`http://127.0.0.1:${context.ports.controlPlane}/readyz`))),
};
