import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { portBase, portMap } from '../src/ports.js';
import { MINIO_EVENTS_PATH, MINIO_SHARED_SETTINGS } from '../src/servers/minio.js';
import { renderProxyConfig } from '../src/servers/proxy.js';
import { instancesOf } from '../src/servers/types.js';

/**
 * Static checks of compose.yaml and compose.scale.yaml, through docker-compose's own parser (`config`
 * validates a file and interpolates .env values without contacting a Docker engine), plus the
 * cross-file contracts that only the Docker path has: ejabberd.yml's API allow-list versus the compose
 * network, the control plane's settings versus the servers' configs, and the scale file's HAProxy
 * config versus the one the native runner renders.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const composeFile = join(root, 'compose.yaml');
const scaleComposeFile = join(root, 'compose.scale.yaml');
const exampleEnvFile = join(root, 'infra/compose.env.example');
const ejabberdConfigFile = join(root, 'infra/compose/ejabberd.yml');
const haproxyConfigFile = join(root, 'infra/compose/haproxy.cfg');

interface PortMapping {
  target?: number | string;
  published?: number | string;
  host_ip?: string;
  protocol?: string;
}

interface ComposeService {
  image?: string;
  build?: unknown;
  command?: string | string[];
  entrypoint?: string | string[];
  restart?: string;
  healthcheck?: { test?: string | string[]; disable?: boolean };
  ports?: Array<string | PortMapping>;
  depends_on?: string[] | Record<string, { condition?: string }>;
  environment?: Record<string, string | null>;
  extra_hosts?: string[] | Record<string, string>;
  networks?: Record<string, { ipv4_address?: string } | null> | string[];
  volumes?: Array<string | { type?: string; source?: string; target?: string }>;
}

interface ComposeNetwork {
  internal?: boolean;
  ipam?: { config?: Array<{ subnet?: string }> };
}

interface ComposeConfig {
  services: Record<string, ComposeService>;
  networks?: Record<string, ComposeNetwork>;
}

function runCompose(args: readonly string[], envFile: string, file = composeFile) {
  return spawnSync(
    'docker-compose',
    ['--project-directory', root, '-f', file, '--env-file', envFile, ...args],
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

const rendered = new Map<string, ComposeConfig>();
/** A compose file (compose.yaml unless named) as docker-compose resolves it with the example env file (parsed once). */
function renderedConfig(file = composeFile): ComposeConfig {
  let config = rendered.get(file);
  if (!config) {
    const result = runCompose(['config'], exampleEnvFile, file);
    expect(result.status, result.stderr).toBe(0);
    config = parse(result.stdout) as ComposeConfig;
    rendered.set(file, config);
  }
  return config;
}

function service(name: string, file = composeFile): ComposeService {
  const found = renderedConfig(file).services[name];
  if (!found) throw new Error(`${file} has no service ${name}`);
  return found;
}

function environment(name: string, file = composeFile): Record<string, string> {
  const env = service(name, file).environment ?? {};
  return Object.fromEntries(Object.entries(env).map(([key, value]) => [key, value ?? '']));
}

/** Container ports a service publishes on the host, e.g. [5280] or [7881, 7882]. */
function publishedTargets(name: string, file = composeFile): number[] {
  return (service(name, file).ports ?? []).map((port) => {
    if (typeof port !== 'string') return Number(port.target);
    // [host_ip:][published:]target[/protocol]
    const withoutProtocol = port.split('/')[0] ?? port;
    return Number(withoutProtocol.split(':').at(-1));
  });
}

/** The host address of each published port ('' when it binds all addresses). */
function publishedHostAddresses(name: string, file = composeFile): string[] {
  return (service(name, file).ports ?? []).map((port) => {
    if (typeof port !== 'string') return port.host_ip ?? '';
    const parts = (port.split('/')[0] ?? port).split(':');
    return parts.length === 3 ? (parts[0] ?? '') : '';
  });
}

/** A service's named volumes as "source:target" (docker-compose prints either form). */
function namedVolumes(name: string, file = composeFile): string[] {
  return (service(name, file).volumes ?? []).map((volume) =>
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

  composeIt(
    'runs Redis with its append-only file and a snapshot at most hourly, in both compose files',
    () => {
      for (const file of [composeFile, scaleComposeFile]) {
        const command = [service('redis', file).command ?? []].flat().join(' ');
        expect(command, file).toContain('--appendonly yes');
        expect(command, file).toContain('--save 3600 1');
      }
    },
  );

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
        'svc_revoke_user',
        'svc_revoke_prefix',
        'svc_flush_org',
        'svc_set_archiving',
        'svc_open_conversation',
        'svc_set_conversation_staff',
        'svc_set_conversation_titles',
        'svc_set_room_places',
        'svc_set_rooms_max_users',
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

  composeIt("points ejabberd's logins at the control plane, which it does not wait for", () => {
    const ejabberd = parse(readFileSync(ejabberdConfigFile, 'utf8')) as {
      auth_method: string[];
      auth_use_cache: boolean;
      modules: Record<string, unknown>;
    };
    expect(ejabberd).toMatchObject({ auth_method: ['svc_api', 'svc_control_plane'], auth_use_cache: false });
    expect(ejabberd.modules).toHaveProperty('mod_svc_scope');
    const controlPlane = environment('control-plane');
    expect(environment('ejabberd')).toEqual({
      CONTROL_PLANE_URL: `http://control-plane:${controlPlane.SVC_INTERNAL_PORT}`,
      CONTROL_PLANE_SECRET: controlPlane.SVC_EJABBERD_AUTH_SECRET,
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

/** The networks a service is on. */
function networksOf(name: string, file = composeFile): string[] {
  const networks = service(name, file).networks ?? [];
  return Array.isArray(networks) ? networks : Object.keys(networks);
}

/** A service's fixed address on a network, if it has one. */
function fixedAddress(name: string, network: string, file = composeFile): string | undefined {
  const networks = service(name, file).networks;
  return Array.isArray(networks) ? undefined : (networks?.[network]?.ipv4_address ?? undefined);
}

/** `docker-compose config` prints a literal $ as $$ (as it must be written in the file). */
function literal(text: string): string {
  return text.replaceAll('$$', '$');
}

/** A one-shot job: runs to completion on `up` and is never restarted. */
function isOneShot(definition: ComposeService): boolean {
  return definition.restart === 'no';
}

function healthCheckDisabled(definition: ComposeService): boolean {
  const test = definition.healthcheck?.test;
  return definition.healthcheck?.disable === true || (Array.isArray(test) && test[0] === 'NONE');
}

/** extra_hosts as a host → address map (docker-compose prints "host:address" lines). */
function extraHosts(name: string, file = composeFile): Record<string, string> {
  const hosts = service(name, file).extra_hosts ?? [];
  if (!Array.isArray(hosts)) return hosts;
  return Object.fromEntries(
    hosts.map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1)]),
  );
}

/** The text of an entrypoint's `sh -c` script (the argument after -c). */
function shellScript(name: string, file = composeFile): string {
  const entrypoint = service(name, file).entrypoint;
  expect(Array.isArray(entrypoint), `${name}: entrypoint as a list`).toBe(true);
  const words = entrypoint as string[];
  const script = words[words.indexOf('-c') + 1];
  expect(words.slice(0, 3), name).toEqual(['/usr/bin/tini', '--', '/bin/sh']);
  return literal(script ?? '');
}

/** An HAProxy config as its sections ("frontend x", "defaults", ...) and their lines, comments left out. */
function haproxySections(config: string): Map<string, string[]> {
  const sections = new Map<string, string[]>();
  let lines: string[] | undefined;
  for (const raw of config.split('\n')) {
    const line = raw.replace(/^\s*#.*$/, '').trimEnd();
    if (line === '') continue;
    if (/^\S/.test(line)) {
      lines = [];
      sections.set(line, lines);
    } else lines?.push(line.trim());
  }
  return sections;
}

describe('compose.scale.yaml', () => {
  const scale = scaleComposeFile;
  const replicated = ['control-plane', 'ejabberd', 'livekit'] as const;
  /** Each frontend of haproxy.cfg: the service prefix of its instances and their port (compose.yaml's). */
  const frontends = {
    control_plane: { service: 'control-plane', port: 8080, published: true },
    control_plane_internal: { service: 'control-plane', port: 8081, published: false },
    ejabberd_ws: { service: 'ejabberd', port: 5280, published: true },
    ejabberd_api: { service: 'ejabberd', port: 5281, published: false },
    ejabberd_component: { service: 'ejabberd', port: 5275, published: false },
    livekit: { service: 'livekit', port: 7880, published: true },
  } as const;

  composeIt(
    'validates with infra/compose.env.example (docker-compose -f compose.scale.yaml config -q)',
    () => {
      const result = runCompose(['config', '-q'], exampleEnvFile, scale);
      expect(result.status, result.stderr).toBe(0);
    },
  );

  composeIt('refuses to render without the secrets of .env, the cluster cookie among them', () => {
    const dir = mkdtempSync(join(tmpdir(), 'compose-test-'));
    try {
      const emptyEnvFile = join(dir, 'empty.env');
      writeFileSync(emptyEnvFile, '');
      const empty = runCompose(['config', '-q'], emptyEnvFile, scale);
      expect(empty.status).not.toBe(0);
      expect(empty.stderr).toMatch(/set [A-Z_]+ in \.env/);
      const withoutCookie = join(dir, 'no-cookie.env');
      const example = readFileSync(exampleEnvFile, 'utf8');
      expect(example).toMatch(/^EJABBERD_COOKIE=change-me/m);
      writeFileSync(withoutCookie, example.replace(/^EJABBERD_COOKIE=.*$/m, ''));
      const noCookie = runCompose(['config', '-q'], withoutCookie, scale);
      expect(noCookie.status).not.toBe(0);
      expect(noCookie.stderr).toContain('set EJABBERD_COOKIE in .env');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  composeIt('runs two of each replicated server and one of the rest, each with a health check', () => {
    const services = renderedConfig(scale).services;
    expect(Object.keys(services).sort()).toEqual(
      [
        'postgres',
        'redis',
        'ejabberd-a',
        'ejabberd-b',
        'ejabberd-join',
        'livekit-a',
        'livekit-b',
        'minio-drives',
        'minio',
        'ai',
        'haproxy',
        'control-plane-a',
        'control-plane-b',
      ].sort(),
    );
    for (const name of replicated) {
      expect(
        Object.keys(services)
          .filter((service) => service.startsWith(`${name}-`))
          .sort(),
        name,
      ).toEqual(
        name === 'ejabberd' ? ['ejabberd-a', 'ejabberd-b', 'ejabberd-join'] : [`${name}-a`, `${name}-b`],
      );
    }
    const oneShots = Object.keys(services).filter((name) => isOneShot(services[name] ?? {}));
    expect(oneShots.sort()).toEqual(['ejabberd-join', 'minio-drives']);
    for (const [name, definition] of Object.entries(services)) {
      if (isOneShot(definition)) {
        // Its success is its exit code, not a health state.
        expect(healthCheckDisabled(definition), name).toBe(true);
        continue;
      }
      expect(definition.restart, name).toBe('unless-stopped');
      expect(healthCheckDisabled(definition), name).toBe(false);
      expect(definition.healthcheck?.test, `${name} has no healthcheck`).toBeTruthy();
    }
  });

  composeIt("builds or pulls each server as compose.yaml does, and MinIO's health means write quorum", () => {
    const same = {
      'ejabberd-a': 'ejabberd',
      'ejabberd-b': 'ejabberd',
      'ejabberd-join': 'ejabberd',
    } as Record<string, string>;
    for (const name of ['livekit', 'control-plane']) for (const x of ['a', 'b']) same[`${name}-${x}`] = name;
    for (const name of ['postgres', 'redis', 'minio', 'ai']) same[name] = name;
    for (const [name, single] of Object.entries(same)) {
      expect({ image: service(name, scale).image, build: service(name, scale).build }, name).toEqual({
        image: service(single).image,
        build: service(single).build,
      });
    }
    expect(service('haproxy', scale).image).toBe('haproxy:2.6');
    expect(service('minio', scale).healthcheck?.test).toContain('http://127.0.0.1:9000/minio/health/cluster');
  });

  composeIt('starts a service after its dependencies are healthy, or after a one-shot job succeeded', () => {
    const services = renderedConfig(scale).services;
    for (const [name, definition] of Object.entries(services)) {
      const dependsOn = definition.depends_on ?? {};
      expect(Array.isArray(dependsOn), `${name}: depends_on needs conditions`).toBe(false);
      for (const [dependency, rule] of Object.entries(dependsOn) as Array<[string, { condition?: string }]>) {
        const oneShot = isOneShot(services[dependency] ?? {});
        expect(rule.condition, `${name} -> ${dependency}`).toBe(
          oneShot ? 'service_completed_successfully' : 'service_healthy',
        );
      }
    }
    for (const name of ['control-plane-a', 'control-plane-b'])
      expect(Object.keys(service(name, scale).depends_on ?? {}).sort(), name).toEqual(
        [
          'ai',
          'ejabberd-a',
          'ejabberd-b',
          'ejabberd-join',
          'haproxy',
          'livekit-a',
          'livekit-b',
          'minio',
          'postgres',
          'redis',
        ].sort(),
      );
    // Nothing is routed to ejabberd-b before it joined; the joiner waits for both nodes.
    expect(Object.keys(service('haproxy', scale).depends_on ?? {})).toEqual(['ejabberd-join']);
    expect(Object.keys(service('ejabberd-join', scale).depends_on ?? {}).sort()).toEqual([
      'ejabberd-a',
      'ejabberd-b',
    ]);
    expect(Object.keys(service('minio', scale).depends_on ?? {})).toEqual(['minio-drives']);
    for (const name of ['ejabberd-a', 'ejabberd-b'])
      expect(service(name, scale).depends_on, name).toBeUndefined();
  });

  composeIt('publishes the public frontends on HAProxy only, and no instance its own ports', () => {
    const services = renderedConfig(scale).services;
    const publicPorts = Object.values(frontends)
      .filter((frontend) => frontend.published)
      .map((frontend) => frontend.port);
    expect(publishedTargets('haproxy', scale).sort()).toEqual([...publicPorts].sort());
    expect(publishedHostAddresses('haproxy', scale)).toEqual(['127.0.0.1', '127.0.0.1', '127.0.0.1']);
    // The control planes' ports (8080, 8081), ejabberd's (5280, 5281, 5275, distribution) and LiveKit's
    // signalling are the proxy's to publish, and the internal frontends nobody's.
    const proxied = Object.values(frontends).map((frontend) => frontend.port);
    for (const name of Object.keys(services).filter((name) => name !== 'haproxy'))
      for (const port of publishedTargets(name, scale))
        expect(proxied, `${name} publishes ${port}`).not.toContain(port);
    for (const name of [
      'control-plane-a',
      'control-plane-b',
      'ejabberd-a',
      'ejabberd-b',
      'ejabberd-join',
      'postgres',
      'redis',
      'ai',
    ])
      expect(publishedTargets(name, scale), name).toEqual([]);
    expect(publishedTargets('minio', scale)).toEqual([9000]);
    expect(publishedHostAddresses('minio', scale)).toEqual(['127.0.0.1']);
    // Each LiveKit node its own media ports, on all addresses, the ones its config advertises.
    const media = ['livekit-a', 'livekit-b'].map((name) => {
      const config = parse(environment(name, scale).LIVEKIT_CONFIG ?? '') as {
        port: number;
        rtc: { tcp_port: number; udp_port: number };
      };
      expect(config.port, name).toBe(frontends.livekit.port);
      expect(publishedTargets(name, scale).sort(), name).toEqual(
        [config.rtc.tcp_port, config.rtc.udp_port].sort(),
      );
      expect(publishedHostAddresses(name, scale), name).toEqual(['', '']);
      return [config.rtc.tcp_port, config.rtc.udp_port];
    });
    expect(new Set(media.flat()).size).toBe(4);
  });

  composeIt('keeps each network to the services that need it', () => {
    const networks = renderedConfig(scale).networks ?? {};
    for (const name of ['data', 'rooms', 'cluster', 'chat', 'storage', 'ai'])
      expect(networks[name]?.internal, name).toBe(true);
    const members = (network: string) =>
      Object.keys(renderedConfig(scale).services)
        .filter((name) => networksOf(name, scale).includes(network))
        .sort();
    expect(members('data')).toEqual(['control-plane-a', 'control-plane-b', 'postgres', 'redis']);
    expect(members('rooms')).toEqual(['livekit-a', 'livekit-b', 'redis']);
    expect(members('cluster')).toEqual(['ejabberd-a', 'ejabberd-b', 'ejabberd-join']);
    expect(members('chat')).toEqual(['ejabberd-a', 'ejabberd-b', 'haproxy']);
    expect(members('control')).toEqual(['control-plane-a', 'control-plane-b', 'haproxy']);
    expect(members('edge')).toEqual(['haproxy', 'livekit-a', 'livekit-b', 'minio']);
    expect(members('storage')).toEqual(['control-plane-a', 'control-plane-b', 'minio']);
    expect(members('ai')).toEqual(['ai', 'control-plane-a', 'control-plane-b']);
    // The proxy and each instance behind it share one network, so a name has one address.
    for (const { service: prefix } of Object.values(frontends))
      for (const name of [`${prefix}-a`, `${prefix}-b`]) {
        const shared = networksOf(name, scale).filter((network) =>
          networksOf('haproxy', scale).includes(network),
        );
        expect(shared, name).toHaveLength(1);
      }
    expect(service('minio-drives', scale)).toMatchObject({ network_mode: 'none' });
  });

  composeIt('points every replica at the proxy, trusting its address only, otherwise as compose.yaml', () => {
    const a = environment('control-plane-a', scale);
    expect(environment('control-plane-b', scale)).toEqual(a);
    const proxyAddress = fixedAddress('haproxy', 'control', scale);
    expect(proxyAddress).toMatch(/^10\.77\.13\.\d+$/);
    expect(a).toMatchObject({
      SVC_TRUST_PROXY: proxyAddress,
      SVC_EJABBERD_API_URL: `http://haproxy:${frontends.ejabberd_api.port}/api`,
      SVC_MESSAGING_COMPONENT_URL: `xmpp://haproxy:${frontends.ejabberd_component.port}`,
      SVC_LIVEKIT_URL: `http://haproxy:${frontends.livekit.port}`,
      SVC_S3_ENDPOINT: 'http://minio:9000',
      SVC_PORT: String(frontends.control_plane.port),
      SVC_INTERNAL_PORT: String(frontends.control_plane_internal.port),
    });
    const subnet = renderedConfig(scale).networks?.control?.ipam?.config?.[0]?.subnet;
    expect(subnet).toBe('10.77.13.0/24');
    // Everything else is compose.yaml's control plane, word for word.
    const differing = [
      'SVC_TRUST_PROXY',
      'SVC_EJABBERD_API_URL',
      'SVC_MESSAGING_COMPONENT_URL',
      'SVC_LIVEKIT_URL',
    ];
    const without = (env: Record<string, string>) =>
      Object.fromEntries(Object.entries(env).filter(([key]) => !differing.includes(key)));
    expect(without(a)).toEqual(without(environment('control-plane')));
    // The servers call the replicas back through the proxy's internal frontend.
    const internal = `http://haproxy:${frontends.control_plane_internal.port}`;
    expect(environment('minio', scale).MINIO_NOTIFY_WEBHOOK_ENDPOINT_PRIMARY).toBe(
      `${internal}${MINIO_EVENTS_PATH}`,
    );
    for (const name of ['ejabberd-a', 'ejabberd-b'])
      expect(environment(name, scale).CONTROL_PLANE_URL, name).toBe(internal);
  });

  composeIt('clusters the ejabberd nodes with one cookie, over their own network only', () => {
    const controlPlane = environment('control-plane-a', scale);
    const cookie = environment('ejabberd-a', scale).EJABBERD_COOKIE;
    expect(cookie?.length).toBeGreaterThanOrEqual(32);
    const hosts = extraHosts('ejabberd-a', scale);
    for (const [name, other] of [
      ['ejabberd-a', 'ejabberd-b'],
      ['ejabberd-b', 'ejabberd-a'],
    ] as const) {
      const env = environment(name, scale);
      // As compose.yaml's node, plus the node's identity in the cluster.
      expect(env, name).toEqual({
        ...environment('ejabberd'),
        CONTROL_PLANE_URL: 'http://haproxy:8081',
        EJABBERD_COOKIE: cookie,
        ERL_DIST_PORT: '4370',
        ERLANG_NODE_ARG: `ejabberd@${name}`,
        EJABBERD_DIST_ADDRESS: fixedAddress(name, 'cluster', scale),
      });
      expect(env.CONTROL_PLANE_SECRET).toBe(controlPlane.SVC_EJABBERD_AUTH_SECRET);
      expect(env.EJABBERD_COMPONENT_SECRET).toBe(controlPlane.SVC_MESSAGING_COMPONENT_SECRET);
      // Both names resolve to the nodes' cluster addresses, wherever Erlang distribution runs.
      expect(hosts[name]).toBe(env.EJABBERD_DIST_ADDRESS);
      expect(extraHosts(name, scale), name).toEqual(hosts);
      expect(fixedAddress(other, 'cluster', scale)).not.toBe(env.EJABBERD_DIST_ADDRESS);
      expect(namedVolumes(name, scale), name).toEqual([`${name}-data:/var/lib/ejabberd`]);
    }
    expect(extraHosts('ejabberd-join', scale)).toEqual(hosts);
    expect(renderedConfig(scale).networks?.cluster?.ipam?.config?.[0]?.subnet).toBe('10.77.12.0/24');

    // The image's start, with the cluster's node name, distribution address and cookie.
    const script = shellScript('ejabberd-a', scale);
    expect(shellScript('ejabberd-b', scale)).toBe(script);
    expect(script).toContain('exec env -u EJABBERD_COOKIE /usr/local/bin/svc-ejabberd-start /usr/bin/erl');
    expect(script).toContain('-sname "$ERLANG_NODE_ARG"');
    expect(script).toContain('-start_epmd false -erl_epmd_port "$ERL_DIST_PORT"');
    expect(script).toContain('-kernel inet_dist_use_interface "{$(echo "$EJABBERD_DIST_ADDRESS" | tr . ,)}"');
    expect(script).toContain('chmod 0400 "$HOME/.erlang.cookie"');
    // Every other argument of the image's CMD is there too.
    const dockerfile = readFileSync(join(root, 'infra/ejabberd.Dockerfile'), 'utf8');
    const cmd = JSON.parse(
      /^CMD (\[[^\]]*\])/m.exec(dockerfile.replaceAll('\\\n', ''))?.[1] ?? '[]',
    ) as string[];
    expect(cmd.slice(0, 3)).toEqual(['/usr/bin/erl', '-sname', 'ejabberd@localhost']);
    const imageOnly = new Set(['ejabberd@localhost', 'inet_dist_use_interface', '{127,0,0,1}']);
    const scriptWords = script.split(/[\s\\]+/).map((word) => word.replace(/^'(.*)'$/, '$1'));
    for (const word of cmd.filter((word) => !imageOnly.has(word))) expect(scriptWords, word).toContain(word);

    // The joiner: b into a's cluster, as the runner's joinCluster does it.
    expect(environment('ejabberd-join', scale)).toEqual({
      EJABBERD_COOKIE: cookie,
      ERL_DIST_PORT: '4370',
      EJABBERD_JOIN_NODE: 'ejabberd@ejabberd-b',
      EJABBERD_SEED_NODE: 'ejabberd@ejabberd-a',
    });
    const joinScript = shellScript('ejabberd-join', scale);
    expect(joinScript).toContain('-hidden');
    expect(joinScript).toContain('-dist_listen false');
    expect(joinScript).toContain('rpc:call(Node, ejabberd_cluster, get_nodes, [], 10000)');
    expect(joinScript).toContain(
      'rpc:call(Node, ejabberd_admin, join_cluster, [atom_to_binary(Seed)], 120000)',
    );
    expect(service('ejabberd-join', scale).volumes).toBeUndefined();
  });

  composeIt("gives both LiveKit nodes the control plane's key, its webhook and one Redis database", () => {
    const controlPlane = environment('control-plane-a', scale);
    const apiKey = controlPlane.SVC_LIVEKIT_API_KEY ?? '';
    for (const name of ['livekit-a', 'livekit-b']) {
      const livekit = parse(environment(name, scale).LIVEKIT_CONFIG ?? '') as {
        keys: Record<string, string>;
        webhook: { api_key: string; urls: string[] };
        rtc: { node_ip?: string; use_external_ip?: boolean };
        redis: { address: string; password: string; db: number };
      };
      expect(livekit.keys, name).toEqual({ [apiKey]: controlPlane.SVC_LIVEKIT_API_SECRET });
      expect(livekit.webhook, name).toEqual({
        api_key: apiKey,
        urls: ['http://haproxy:8081/internal/livekit/webhook'],
      });
      expect(livekit.rtc.node_ip, name).toBeTruthy();
      expect(livekit.rtc.use_external_ip, name).toBe(false);
      // Database 1: the control planes use 0 (their SVC_REDIS_URL).
      expect(livekit.redis, name).toEqual({
        address: 'redis:6379',
        password: environment('redis', scale).REDISCLI_AUTH,
        db: 1,
      });
      expect(controlPlane.SVC_REDIS_URL).toMatch(/@redis:6379\/0$/);
    }
  });

  composeIt('runs MinIO over four drives that a one-shot job hands to its user', () => {
    const drives = ['minio-d1:/data1', 'minio-d2:/data2', 'minio-d3:/data3', 'minio-d4:/data4'];
    expect(namedVolumes('minio', scale).sort()).toEqual([...drives, 'minio-queue:/queue'].sort());
    expect(service('minio', scale).command).toEqual([
      'server',
      '/data{1...4}',
      '--address',
      ':9000',
      '--console-address',
      ':9001',
    ]);
    expect(namedVolumes('minio-drives', scale).sort()).toEqual(drives);
    // infra/minio.Dockerfile's user.
    const dockerfile = readFileSync(join(root, 'infra/minio.Dockerfile'), 'utf8');
    const uid = /useradd --system --uid (\d+) --gid minio/.exec(dockerfile)?.[1];
    expect(uid).toBeTruthy();
    expect([service('minio-drives', scale).command ?? []].flat().join(' ')).toContain(
      `chown ${uid}:${uid} /data1 /data2 /data3 /data4`,
    );
    const minio = environment('minio', scale);
    const single = environment('minio');
    // compose.yaml's settings, but for the webhook's address (the proxy's internal frontend).
    expect({ ...minio, MINIO_NOTIFY_WEBHOOK_ENDPOINT_PRIMARY: '' }).toEqual({
      ...single,
      MINIO_NOTIFY_WEBHOOK_ENDPOINT_PRIMARY: '',
    });
    expect(minio).toMatchObject(MINIO_SHARED_SETTINGS);
  });

  composeIt("mounts a HAProxy config that mirrors the runner's, with the services for loopback ports", () => {
    expect(namedVolumes('haproxy', scale)).toEqual([
      `${haproxyConfigFile}:/usr/local/etc/haproxy/haproxy.cfg`,
    ]);
    const compose = haproxySections(readFileSync(haproxyConfigFile, 'utf8'));
    const native = haproxySections(renderProxyConfig(portMap(portBase('scale', {})), instancesOf('scale')));
    // The runner's settings, and the proxy's own resolver for Docker's DNS.
    expect(compose.get('global')).toEqual(native.get('global'));
    const defaults = native.get('defaults') ?? [];
    expect(compose.get('defaults')).toEqual(
      defaults.map((line) =>
        line.startsWith('default-server ')
          ? `${line} init-addr libc,none resolvers docker resolve-prefer ipv4`
          : line,
      ),
    );
    expect(compose.get('resolvers docker')).toContain('nameserver docker 127.0.0.11:53');
    const sectionNames = [...compose.keys()].filter((name) => /^(frontend|backend) /.test(name));
    expect(sectionNames.sort()).toEqual(
      [...native.keys()].filter((name) => /^(frontend|backend) /.test(name)).sort(),
    );
    for (const [label, { service: prefix, port }] of Object.entries(frontends)) {
      const frontend = compose.get(`frontend ${label}`) ?? [];
      // The runner's frontend with compose's port, and for the control planes' own callers a source rule.
      const nativeFrontend = (native.get(`frontend ${label}`) ?? []).map((line) =>
        line.startsWith('bind ') ? `bind :${port}` : line,
      );
      const callersOnly = 'tcp-request connection reject unless { src 10.77.13.0/24 }';
      expect(
        frontend.filter((line) => line !== callersOnly),
        label,
      ).toEqual(nativeFrontend);
      expect(frontend.includes(callersOnly), label).toBe(
        label === 'ejabberd_api' || label === 'ejabberd_component',
      );
      const backend = compose.get(`backend ${label}`) ?? [];
      const nativeBackend = native.get(`backend ${label}`) ?? [];
      const isServer = (line: string) => line.startsWith('server ');
      // ejabberd's API answers `status` without credentials to loopback only (ejabberd.yml's "health
      // check"): seen from the proxy's container, 403 means up as well.
      const expected = nativeBackend
        .filter((line) => !isServer(line))
        .map((line) =>
          label === 'ejabberd_api' && line === 'http-check expect status 200'
            ? 'http-check expect rstatus ^(200|403)$'
            : line,
        );
      expect(
        backend.filter((line) => !isServer(line)),
        label,
      ).toEqual(expected);
      expect(backend.filter(isServer), label).toEqual(
        ['a', 'b'].map((instance) => `server ${label}_${instance} ${prefix}-${instance}:${port} check`),
      );
    }
    expect(fixedAddress('haproxy', 'control', scale)).toMatch(/^10\.77\.13\./);
    // The health check connects to every frontend, as the runner's does.
    const check = [service('haproxy', scale).healthcheck?.test ?? []].flat().join(' ');
    for (const { port } of Object.values(frontends)) expect(check).toContain(` ${port}`);
  });

  const haproxyInstalled = spawnSync('haproxy', ['-v'], { encoding: 'utf8' }).status === 0;
  it.skipIf(!haproxyInstalled)(
    haproxyInstalled
      ? 'has a HAProxy config that HAProxy accepts (haproxy -c)'
      : 'has a HAProxy config that HAProxy accepts (skipped: haproxy is not installed)',
    () => {
      const result = spawnSync('haproxy', ['-c', '-f', haproxyConfigFile], {
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(result.status, result.stderr).toBe(0);
    },
  );
});
