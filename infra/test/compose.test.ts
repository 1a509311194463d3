import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { MINIO_EVENTS_PATH, MINIO_SHARED_SETTINGS } from '../src/servers/minio.js';

/**
 * Static checks of compose.yaml, through docker-compose's own parser (`config` validates the file
 * and interpolates .env values without contacting a Docker engine), plus the cross-file contracts
 * that only the Docker path has: ejabberd.yml's API allow-list versus the compose network, and the
 * control plane's settings versus the servers' configs.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const composeFile = join(root, 'compose.yaml');
const exampleEnvFile = join(root, 'infra/compose.env.example');
const ejabberdConfigFile = join(root, 'infra/compose/ejabberd.yml');

interface PortMapping {
  target?: number | string;
  published?: number | string;
  host_ip?: string;
  protocol?: string;
}

interface ComposeService {
  image?: string;
  build?: unknown;
  healthcheck?: { test?: string | string[]; disable?: boolean };
  ports?: Array<string | PortMapping>;
  depends_on?: string[] | Record<string, { condition?: string }>;
  environment?: Record<string, string | null>;
  networks?: Record<string, unknown> | string[];
  volumes?: Array<string | { type?: string; source?: string; target?: string }>;
}

interface ComposeNetwork {
  internal?: boolean;
}

interface ComposeConfig {
  services: Record<string, ComposeService>;
  networks?: Record<string, ComposeNetwork>;
}

function runCompose(args: readonly string[], envFile: string) {
  return spawnSync(
    'docker-compose',
    ['--project-directory', root, '-f', composeFile, '--env-file', envFile, ...args],
    {
      cwd: root,
      encoding: 'utf8',
      // Only PATH: compose interpolates from the process environment before the env file, and the
      // test runner's environment may carry SVC_* settings of a running test stack.
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      timeout: 60_000,
    },
  );
}

const dockerComposeInstalled = spawnSync('docker-compose', ['version'], { encoding: 'utf8' }).status === 0;

/** Each check needs docker-compose; without it the check is reported as skipped, saying why. */
function composeIt(title: string, check: () => void): void {
  const shownTitle = dockerComposeInstalled
    ? title
    : `${title} (skipped: docker-compose is not installed; apt-get install docker-compose)`;
  it.skipIf(!dockerComposeInstalled)(shownTitle, check, 60_000);
}

let rendered: ComposeConfig | undefined;
/** compose.yaml as docker-compose resolves it with the example env file (parsed once). */
function renderedConfig(): ComposeConfig {
  if (!rendered) {
    const result = runCompose(['config'], exampleEnvFile);
    expect(result.status, result.stderr).toBe(0);
    rendered = parse(result.stdout) as ComposeConfig;
  }
  return rendered;
}

function service(name: string): ComposeService {
  const found = renderedConfig().services[name];
  if (!found) throw new Error(`compose.yaml has no service ${name}`);
  return found;
}

function environment(name: string): Record<string, string> {
  const env = service(name).environment ?? {};
  return Object.fromEntries(Object.entries(env).map(([key, value]) => [key, value ?? '']));
}

/** Container ports a service publishes on the host, e.g. [5280] or [7881, 7882]. */
function publishedTargets(name: string): number[] {
  return (service(name).ports ?? []).map((port) => {
    if (typeof port !== 'string') return Number(port.target);
    // [host_ip:][published:]target[/protocol]
    const withoutProtocol = port.split('/')[0] ?? port;
    return Number(withoutProtocol.split(':').at(-1));
  });
}

/** The host address of each published port ('' when it binds all addresses). */
function publishedHostAddresses(name: string): string[] {
  return (service(name).ports ?? []).map((port) => {
    if (typeof port !== 'string') return port.host_ip ?? '';
    const parts = (port.split('/')[0] ?? port).split(':');
    return parts.length === 3 ? (parts[0] ?? '') : '';
  });
}

/** A service's named volumes as "source:target" (docker-compose prints either form). */
function namedVolumes(name: string): string[] {
  return (service(name).volumes ?? []).map((volume) =>
    typeof volume === 'string'
      ? volume.split(':').slice(0, 2).join(':')
      : `${volume.source ?? ''}:${volume.target ?? ''}`,
  );
}

describe('compose.yaml', () => {
  composeIt('validates with infra/compose.env.example (docker-compose config -q)', () => {
    const result = runCompose(['config', '-q'], exampleEnvFile);
    expect(result.status, result.stderr).toBe(0);
  });

  composeIt('refuses to render without the secrets of .env', () => {
    const dir = mkdtempSync(join(tmpdir(), 'compose-test-'));
    try {
      const emptyEnvFile = join(dir, 'empty.env');
      writeFileSync(emptyEnvFile, '');
      const result = runCompose(['config', '-q'], emptyEnvFile);
      expect(result.status).not.toBe(0);
      expect(result.stderr).toMatch(/set [A-Z_]+ in \.env/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  composeIt('defines the seven services, each with a health check', () => {
    const services = renderedConfig().services;
    expect(Object.keys(services).sort()).toEqual(
      ['ai', 'control-plane', 'ejabberd', 'livekit', 'minio', 'postgres', 'redis'].sort(),
    );
    for (const [name, definition] of Object.entries(services)) {
      expect(definition.healthcheck?.disable, name).not.toBe(true);
      expect(definition.healthcheck?.test, `${name} has no healthcheck`).toBeTruthy();
    }
  });

  composeIt('starts a service only after its dependencies are healthy', () => {
    for (const [name, definition] of Object.entries(renderedConfig().services)) {
      const dependsOn = definition.depends_on ?? {};
      // The short (list) form means "started", not "healthy".
      expect(Array.isArray(dependsOn), `${name}: depends_on needs conditions`).toBe(false);
      for (const [dependency, rule] of Object.entries(dependsOn) as Array<[string, { condition?: string }]>) {
        expect(rule.condition, `${name} -> ${dependency}`).toBe('service_healthy');
      }
    }
    expect(Object.keys(service('control-plane').depends_on ?? {}).sort()).toEqual(
      ['ai', 'ejabberd', 'livekit', 'minio', 'postgres', 'redis'].sort(),
    );
  });

  composeIt("keeps PostgreSQL, Redis, ejabberd's API and component and MinIO's console off the host", () => {
    expect(publishedTargets('postgres')).toEqual([]);
    expect(publishedTargets('redis')).toEqual([]);
    expect(publishedTargets('ejabberd')).toEqual([5280]);
    expect(publishedTargets('ejabberd')).not.toContain(5281);
    expect(publishedTargets('ejabberd')).not.toContain(5275);
    expect(publishedTargets('minio')).toEqual([9000]);
    expect(publishedTargets('minio')).not.toContain(9001);
    expect(publishedTargets('livekit').sort()).toEqual([7880, 7881, 7882]);
    expect(publishedTargets('control-plane')).toEqual([8080]);
    expect(renderedConfig().networks?.data?.internal).toBe(true);
    expect(service('postgres').networks).toEqual({ data: null });
    expect(service('redis').networks).toEqual({ data: null });
  });

  composeIt('publishes the HTTP ports on loopback by default, for a reverse proxy on the host', () => {
    for (const name of ['control-plane', 'ejabberd', 'minio']) {
      expect(publishedHostAddresses(name), name).toEqual(['127.0.0.1']);
    }
    const livekitPorts = service('livekit').ports ?? [];
    expect(livekitPorts).toHaveLength(3);
    // Signalling behind the proxy; media ports open to clients.
    expect(publishedHostAddresses('livekit')).toEqual(['127.0.0.1', '', '']);
  });

  composeIt("lets only ejabberd's API accounts into its API, each with its commands", () => {
    const ejabberd = parse(readFileSync(ejabberdConfigFile, 'utf8')) as {
      hosts: string[];
      acl: Record<string, { user?: string[] }>;
      api_permissions: Record<string, { who?: { access?: unknown }; what?: string[] }>;
      modules: { mod_muc: { host: string } };
    };
    expect(ejabberd.acl.control_plane_api?.user).toEqual(['svc-api@chat.local']);
    expect(ejabberd.api_permissions['control plane']).toMatchObject({
      who: { access: 'control_plane_api' },
      what: [
        'create_room_with_opts',
        'change_room_option',
        'set_room_affiliation',
        'svc_revoke_user',
        'svc_revoke_prefix',
        'svc_flush_org',
        'svc_set_archiving',
        'svc_open_conversation',
        'svc_set_conversation_staff',
        'svc_set_conversation_titles',
        'svc_set_circle_places',
        'svc_set_bookmarks',
        'private_set',
        'status',
      ],
    });
    expect(ejabberd.api_permissions['health check']).toMatchObject({
      who: { access: { allow: 'loopback' } },
      what: ['status'],
    });
    expect(service('ejabberd').networks).toEqual({ chat: null });

    const controlPlane = environment('control-plane');
    expect(ejabberd.hosts).toEqual([controlPlane.SVC_CHAT_DOMAIN]);
    expect(ejabberd.modules.mod_muc.host).toBe(controlPlane.SVC_CHAT_MUC_DOMAIN);
  });

  composeIt("points ejabberd's auth bridge at the control plane, which it does not wait for", () => {
    const ejabberd = parse(readFileSync(ejabberdConfigFile, 'utf8')) as {
      auth_method: string[];
      auth_use_cache: boolean;
      modules: Record<string, unknown>;
    };
    expect(ejabberd).toMatchObject({ auth_method: ['svc_api', 'external'], auth_use_cache: false });
    expect(ejabberd.modules).toHaveProperty('mod_svc_scope');
    const controlPlane = environment('control-plane');
    expect(environment('ejabberd')).toEqual({
      EXTAUTH_URL: `http://control-plane:${controlPlane.SVC_INTERNAL_PORT}`,
      EXTAUTH_SECRET: controlPlane.SVC_EJABBERD_AUTH_SECRET,
      EJABBERD_API_SECRET: controlPlane.SVC_EJABBERD_API_SECRET,
      EJABBERD_OPERATOR_SECRET: expect.stringMatching(/.{32}/),
      EJABBERD_COMPONENT_SECRET: controlPlane.SVC_MESSAGING_COMPONENT_SECRET,
    });
    // The control plane waits for ejabberd; the reverse would be a cycle. Logins fail until it is up.
    expect(service('ejabberd').depends_on).toBeUndefined();
  });

  composeIt("serves the control plane's component on the messaging domain, with its secret", () => {
    const ejabberd = parse(readFileSync(ejabberdConfigFile, 'utf8')) as {
      include_config_file: Record<string, { allow_only?: string[] }>;
      listen: Array<{
        port: number;
        ip: string;
        module: string;
        hosts?: Record<string, { password?: string }>;
      }>;
      modules: { mod_svc_scope: { messaging_host?: string } };
    };
    const controlPlane = environment('control-plane');
    const components = ejabberd.listen.filter((listener) => listener.module === 'ejabberd_service');
    expect(components).toHaveLength(1);
    const [component] = components;
    // The control plane connects over the chat network to the listener's port, as its one host.
    expect(controlPlane.SVC_MESSAGING_COMPONENT_URL).toBe(`xmpp://ejabberd:${component?.port}`);
    expect(component?.ip).toBe('0.0.0.0');
    expect(Object.keys(component?.hosts ?? {})).toEqual([controlPlane.SVC_MESSAGING_DOMAIN]);
    expect(controlPlane.SVC_MESSAGING_DOMAIN).toBe(`notify.${controlPlane.SVC_CHAT_DOMAIN}`);
    expect(ejabberd.modules.mod_svc_scope.messaging_host).toBe(controlPlane.SVC_MESSAGING_DOMAIN);
    // The password is a macro that the image's start script defines from EJABBERD_COMPONENT_SECRET
    // (infra/ejabberd.Dockerfile), in a file ejabberd.yml takes nothing else from.
    const password = component?.hosts?.[controlPlane.SVC_MESSAGING_DOMAIN ?? '']?.password;
    expect(password).toBe('SVC_COMPONENT_SECRET');
    expect(ejabberd.include_config_file).toEqual({
      '/run/svc-ejabberd/component-secret.yml': { allow_only: ['define_macro'] },
    });
    const dockerfile = readFileSync(join(root, 'infra/ejabberd.Dockerfile'), 'utf8');
    expect(dockerfile).toContain(
      `JSON.stringify({ define_macro: { ${password}: process.env.EJABBERD_COMPONENT_SECRET } })`,
    );
    expect(dockerfile).toContain('/run/svc-ejabberd/component-secret.yml');
    expect(dockerfile).toMatch(/exec env( -u \w+)* -u EJABBERD_COMPONENT_SECRET /);
  });

  composeIt("gives LiveKit a config whose key, secret and webhook match the control plane's", () => {
    const livekit = parse(environment('livekit').LIVEKIT_CONFIG ?? '') as {
      keys: Record<string, string>;
      webhook: { api_key: string; urls: string[] };
      rtc: { node_ip?: string; use_external_ip?: boolean };
    };
    const controlPlane = environment('control-plane');
    const apiKey = controlPlane.SVC_LIVEKIT_API_KEY ?? '';
    expect(livekit.keys[apiKey]).toBe(controlPlane.SVC_LIVEKIT_API_SECRET);
    expect(Object.keys(livekit.keys)).toContain(livekit.webhook.api_key);
    expect(livekit.webhook.urls).toEqual(['http://control-plane:8081/internal/livekit/webhook']);
    expect(livekit.rtc.node_ip).toBeTruthy();
    expect(livekit.rtc.use_external_ip).toBe(false);
  });

  composeIt("posts MinIO's bucket events to the control plane, queued on their own volume", () => {
    const minio = environment('minio');
    expect(minio).toMatchObject({
      MINIO_NOTIFY_WEBHOOK_ENDPOINT_PRIMARY: `http://control-plane:8081${MINIO_EVENTS_PATH}`,
      MINIO_NOTIFY_WEBHOOK_AUTH_TOKEN_PRIMARY: environment('control-plane').SVC_MINIO_WEBHOOK_SECRET,
      MINIO_NOTIFY_WEBHOOK_QUEUE_DIR_PRIMARY: '/queue',
    });
    expect(namedVolumes('minio').sort()).toEqual(['minio-data:/data', 'minio-queue:/queue']);
    // The rest as the native runner has them.
    expect(minio).toMatchObject(MINIO_SHARED_SETTINGS);
    // MinIO starts before the control plane and queues events until it answers.
    expect(service('minio').depends_on).toBeUndefined();
  });

  composeIt('points the control plane at internal URLs and MinIO at the same S3 region', () => {
    const controlPlane = environment('control-plane');
    expect(controlPlane).toMatchObject({
      SVC_HOST: '0.0.0.0',
      SVC_PORT: '8080',
      SVC_INTERNAL_HOST: '0.0.0.0',
      SVC_INTERNAL_PORT: '8081',
      SVC_EJABBERD_API_URL: 'http://ejabberd:5281/api',
      SVC_LIVEKIT_URL: 'http://livekit:7880',
      SVC_S3_ENDPOINT: 'http://minio:9000',
    });
    expect(controlPlane.SVC_DATABASE_URL).toMatch(/^postgres:\/\/svc:[^@]+@postgres:5432\/svc$/);
    expect(controlPlane.SVC_REDIS_URL).toMatch(/^redis:\/\/:[^@]+@redis:6379\/0$/);
    for (const name of [
      'SVC_EJABBERD_AUTH_SECRET',
      'SVC_MINIO_WEBHOOK_SECRET',
      'SVC_SHIELD_HASH_KEY',
      'SVC_EJABBERD_API_SECRET',
      'SVC_SEALING_KEY',
      'SVC_MESSAGING_COMPONENT_SECRET',
    ])
      expect(controlPlane[name]?.length, name).toBeGreaterThanOrEqual(32);
    // Each caller its own secret.
    expect(new Set([controlPlane.SVC_EJABBERD_AUTH_SECRET, controlPlane.SVC_MINIO_WEBHOOK_SECRET]).size).toBe(
      2,
    );
    expect(controlPlane.SVC_LIVEKIT_API_SECRET?.length).toBeGreaterThanOrEqual(32);
    // Webhook deliveries keep the secure defaults: public https:// receivers only.
    expect(controlPlane).toMatchObject({
      SVC_WEBHOOK_ALLOWED_NETWORKS: '',
      SVC_WEBHOOK_ALLOW_HTTP: 'false',
      SVC_BALANCE_LOW_USD: '1',
    });
    const minio = environment('minio');
    expect(minio.MINIO_SITE_REGION).toBe(controlPlane.SVC_S3_REGION);
    expect(minio.MINIO_ROOT_USER).toBe(controlPlane.SVC_S3_ACCESS_KEY);
    expect(minio.MINIO_ROOT_PASSWORD).toBe(controlPlane.SVC_S3_SECRET_KEY);
  });
});
