import { runAdmin } from './admin.js';
import { controlPlaneSettings } from './env-file.js';
import { StackError } from './errors.js';
import type { StackContext } from './servers/types.js';

export interface DevKey {
  account_id: string;
  app_id: string;
  key: string;
}

function parseDevKey(stdout: string): DevKey | undefined {
  try {
    const value = JSON.parse(stdout) as Partial<DevKey>;
    return typeof value.key === 'string' ? (value as DevKey) : undefined;
  } catch {
    return undefined;
  }
}

/** The local account, app and test key (kept in dev-key.json by the admin CLI across runs). */
export async function ensureDevKey(context: StackContext): Promise<DevKey> {
  const result = await runAdmin(['dev-key', '--state-file', context.paths.devKeyFile], {
    env: { ...process.env, ...controlPlaneSettings(context.ports, context.secrets) },
  });
  const devKey = result.code === 0 ? parseDevKey(result.stdout) : undefined;
  if (devKey === undefined)
    throw new StackError(
      `"admin dev-key" failed (exit ${result.code}):\n${`${result.stderr}${result.stdout}`.trim()}`,
    );
  return devKey;
}

export function renderBanner(context: StackContext, devKey: DevKey): string {
  const { ports } = context;
  const api = `http://127.0.0.1:${ports.controlPlane}`;
  const rows = [
    ['API', api],
    ['Dashboard', `${api}/dashboard`],
    ['OpenAPI', `${api}/v1/openapi.json`],
    ['ejabberd WS', `ws://127.0.0.1:${ports.ejabberdWebSocket}/ws`],
    ['LiveKit WS', `ws://127.0.0.1:${ports.livekitHttp}`],
    ['MinIO S3', `http://127.0.0.1:${ports.minioS3}`],
    ['test key', devKey.key],
    ['account / app', `${devKey.account_id} / ${devKey.app_id}`],
  ];
  const profile = context.profile === 'dev' ? '' : ` --profile ${context.profile}`;
  return [
    '',
    `The ${context.profile} stack is up.`,
    '',
    ...rows.map(([label, value]) => `  ${label?.padEnd(14)}${value}`),
    '',
    'Try it:',
    `  curl -H "Authorization: Bearer ${devKey.key}" ${api}/v1/realtime/balance`,
    '',
    "Open the dashboard: invite yourself as the account's owner, then open the url it prints:",
    `  npm run admin -- dashboard invite --account ${devKey.account_id} --email you@example.com${profile}`,
    '',
    `Manage it: npm run stack -- status${profile} | logs [server] [-f]${profile} | down${profile}`,
    '',
  ].join('\n');
}
