import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { StackError } from './errors.js';
import { writeFileAtomic } from './files.js';
import { binDirOf, REPO_ROOT, stackPaths } from './paths.js';
import type { PortMap } from './ports.js';
import type { Profile } from './profile.js';
import type { StackSecrets } from './secrets.js';

/** Names shared by the servers' configs and the control plane's settings. */
export const CHAT_DOMAIN = 'chat.local';
export const CHAT_MUC_DOMAIN = `conference.${CHAT_DOMAIN}`;
/** The control plane's external component (XEP-0114): the messaging identities' domain. */
export const MESSAGING_DOMAIN = `notify.${CHAT_DOMAIN}`;
export const S3_REGION = 'us-east-1';
export const LIVEKIT_WEBHOOK_PATH = '/internal/livekit/webhook';
/** ejabberd's HTTP API accounts: the control plane's, and the operator's (ejabberd.yml's api_permissions). */
export const EJABBERD_API_USER = 'svc-api';
export const EJABBERD_OPERATOR_USER = 'svc-operator';
/** The control plane's own ffprobe in .stack/bin, built by infra/media/build-ffprobe.sh. */
export const FFPROBE_BUILD = 'ffprobe-svc';

/** The control plane's settings for a profile: its configuration contract, one SVC_* name each. */
export function controlPlaneSettings(ports: PortMap, secrets: StackSecrets): Record<string, string> {
  const local = (scheme: string, port: number, path = '') => `${scheme}://127.0.0.1:${port}${path}`;
  return {
    SVC_HOST: '127.0.0.1',
    SVC_PORT: String(ports.controlPlane),
    SVC_PUBLIC_URL: local('http', ports.controlPlane),
    SVC_INTERNAL_HOST: '127.0.0.1',
    SVC_INTERNAL_PORT: String(ports.controlPlaneInternal),
    SVC_LOG_LEVEL: 'info',
    SVC_DATABASE_URL: `postgres://svc:${secrets.postgresPassword}@127.0.0.1:${ports.postgres}/svc`,
    SVC_REDIS_URL: `redis://:${secrets.redisPassword}@127.0.0.1:${ports.redis}/0`,
    SVC_EJABBERD_AUTH_SECRET: secrets.ejabberdAuthSecret,
    SVC_MINIO_WEBHOOK_SECRET: secrets.minioWebhookSecret,
    SVC_SHIELD_HASH_KEY: secrets.shieldHashKey,
    SVC_EJABBERD_API_URL: local('http', ports.ejabberdApi, '/api'),
    SVC_EJABBERD_API_SECRET: secrets.ejabberdApiSecret,
    SVC_CHAT_WS_URL: local('ws', ports.ejabberdWebSocket, '/ws'),
    SVC_CHAT_DOMAIN: CHAT_DOMAIN,
    SVC_CHAT_MUC_DOMAIN: CHAT_MUC_DOMAIN,
    SVC_MESSAGING_COMPONENT_URL: local('xmpp', ports.ejabberdComponent),
    SVC_MESSAGING_COMPONENT_SECRET: secrets.ejabberdComponentSecret,
    SVC_MESSAGING_DOMAIN: MESSAGING_DOMAIN,
    SVC_LIVEKIT_URL: local('http', ports.livekitHttp),
    SVC_LIVEKIT_PUBLIC_URL: local('ws', ports.livekitHttp),
    SVC_LIVEKIT_API_KEY: secrets.livekitApiKey,
    SVC_LIVEKIT_API_SECRET: secrets.livekitApiSecret,
    SVC_S3_ENDPOINT: local('http', ports.minioS3),
    SVC_S3_PUBLIC_ENDPOINT: local('http', ports.minioS3),
    SVC_S3_REGION: S3_REGION,
    SVC_S3_ACCESS_KEY: secrets.minioRootUser,
    SVC_S3_SECRET_KEY: secrets.minioRootPassword,
    SVC_S3_BUCKET: 'svc-objects',
    // The small ffprobe the runner builds (infra/media/build-ffprobe.sh), shared by the profiles.
    SVC_FFPROBE_PATH: join(binDirOf(), FFPROBE_BUILD),
    SVC_SEALING_KEY: secrets.sealingKey,
    // The bundled local provider (ai/serve.py): its chat and its moderation on two ports.
    SVC_AI_BASE_URL: local('http', ports.aiLlm, '/v1'),
    SVC_AI_MODERATION_URL: local('http', ports.aiModeration, '/v1'),
    SVC_AI_API_KEY: secrets.aiApiKey,
    // Everything runs on this machine for development and tests: webhook receivers listen on
    // loopback, over plain HTTP (test keys only; live endpoints are always https://).
    SVC_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128',
    SVC_WEBHOOK_ALLOW_HTTP: 'true',
  };
}

export function formatEnvFile(settings: Readonly<Record<string, string>>): string {
  const lines = Object.entries(settings).map(([name, value]) => `${name}=${value}`);
  return `# Written by infra/src on every "stack up"; edits are overwritten.\n${lines.join('\n')}\n`;
}

/** Reads KEY=VALUE lines; the value is everything after the first "=", unquoted. */
export function parseEnvFile(text: string): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line.trim());
    if (match?.[1] !== undefined) settings[match[1]] = match[2] ?? '';
  }
  return settings;
}

export function writeControlPlaneEnv(file: string, ports: PortMap, secrets: StackSecrets): void {
  writeFileAtomic(file, formatEnvFile(controlPlaneSettings(ports, secrets)));
}

/** A profile's control-plane settings as written by its last "stack up". */
export function loadProfileEnv(profile: Profile, root: string = REPO_ROOT): Record<string, string> {
  const { envFile } = stackPaths(profile, root);
  if (!existsSync(envFile))
    throw new StackError(
      `${envFile} does not exist: start the ${profile} stack first (npm run stack -- up --profile ${profile})`,
    );
  return parseEnvFile(readFileSync(envFile, 'utf8'));
}
