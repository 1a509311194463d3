import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { controlPlaneSettings } from '../env-file.js';
import { StackError } from '../errors.js';
import { runChecked } from '../exec.js';
import { httpOk } from '../health.js';
import type { ServerDefinition } from './types.js';

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
      env: { ...process.env, ...controlPlaneSettings(ports, secrets) },
      cwd: paths.root,
    };
  },

  // Ready means migrations ran and its dependencies answer.
  isHealthy: ({ ports }) => httpOk(`http://127.0.0.1:${ports.controlPlane}/readyz`),
};
