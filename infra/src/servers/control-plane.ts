import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { controlPlaneSettings } from '../env-file.js';
import { StackError } from '../errors.js';
import { runChecked } from '../exec.js';
import { httpOk } from '../health.js';
import type { ServerDefinition } from './types.js';

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

export const controlPlane: ServerDefinition = {
  name: 'control-plane',
  // ffprobe and ffmpeg check published media and make thumbnails.
  aptPackages: ['ffmpeg'],
  // Its grace period for in-flight requests runs on SIGTERM.
  stopSignal: 'SIGTERM',
  ports: ['controlPlane', 'controlPlaneInternal'],
  url: ({ ports }) => `http://127.0.0.1:${ports.controlPlane}`,

  async prepare({ paths }) {
    await runChecked('building the control plane', 'npm', ['run', 'build', '-w', 'control-plane'], {
      cwd: paths.root,
    });
    if (!existsSync(join(paths.root, 'control-plane', 'dist', 'main.js')))
      throw new StackError('control-plane/dist/main.js is missing after "npm run build -w control-plane"');
  },

  launch({ paths, ports, secrets }) {
    return {
      command: process.execPath,
      args: [join(paths.root, 'control-plane', 'dist', 'main.js')],
      // The operator's environment too (NODE_OPTIONS, proxies): it is our own process, as our user.
      env: {
        ...process.env,
        NODE_OPTIONS: withHeapLimit(process.env.NODE_OPTIONS),
        ...controlPlaneSettings(ports, secrets),
      },
      cwd: paths.root,
    };
  },

  // Ready means migrations ran and its dependencies answer.
  isHealthy: ({ ports }) => httpOk(`http://127.0.0.1:${ports.controlPlane}/readyz`),
};
