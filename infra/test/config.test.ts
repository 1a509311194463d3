import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  controlPlaneSettings,
  formatEnvFile,
  loadProfileEnv,
  parseEnvFile,
  writeControlPlaneEnv,
} from '../src/env-file.js';
import { REPO_ROOT, stackPaths } from '../src/paths.js';
import { portMap } from '../src/ports.js';
import type { StackSecrets } from '../src/secrets.js';
import { CONTROL_PLANE_HEAP_MIB, withHeapLimit } from '../src/servers/control-plane.js';
import {
  EXTAUTH_POOL_SIZE,
  ejabberd,
  renderControlPlaneConfig,
  renderEjabberdConfig,
  shellCommand,
} from '../src/servers/ejabberd.js';
import { renderLivekitConfig } from '../src/servers/livekit.js';
import { minio, minioEnvironment } from '../src/servers/minio.js';
import { sharedBuffersMb } from '../src/servers/postgres.js';
import { renderRedisConfig } from '../src/servers/redis.js';
import { renderTemplate } from '../src/template.js';

const ports = portMap(48000);
const secrets: StackSecrets = {
  postgresSuperuserPassword: 'pgsuper0000000000000000000000000',
  postgresPassword: 'pgsvc00000000000000000000000000',
  redisPassword: 'redis000000000000000000000000000',
  ejabberdAuthSecret: 'bridge00000000000000000000000000000000000000000',
  minioWebhookSecret: 'events00000000000000000000000000000000000000000',
  shieldHashKey: 'shield00000000000000000000000000000000000000000',
  sealingKey: 'webhooks000000000000000000000000000000000000000',
  ejabberdApiSecret: 'xmppapi0000000000000000000000000000000000000000',
  ejabberdOperatorSecret: 'operator000000000000000000000000000000000000000',
  ejabberdCookie: 'cookie0000000000000000000000000000000000',
  ejabberdComponentSecret: 'component00000000000000000000000000000000000000',
  livekitApiKey: 'APIkey000000000',
  aiApiKey: 'aikey00000000000000000000000000000000000000000',
  livekitApiSecret: 'lksecret0000000000000000000000000000000000000000',
  minioRootUser: 'minio000000000000000',
  minioRootPassword: 'miniopw000000000000000000000000000000000',
};

describe('renderTemplate', () => {
  it('fills every placeholder', () => {
    expect(renderTemplate('port: {{port}}\nhost: {{ host }}', { port: 1, host: 'a' })).toBe(
      'port: 1\nhost: a',
    );
  });

  it('refuses a placeholder without a value and a value without a placeholder', () => {
    expect(() => renderTemplate('{{port}} {{host}}', { port: 1 })).toThrow(/missing host/);
    expect(() => renderTemplate('{{port}}', { port: 1, host: 'a' })).toThrow(/unused host/);
  });
});

describe('ejabberd config', () => {
  const context = (profile: 'dev' | 'test', root = '/repo') => ({
    profile,
    paths: stackPaths(profile, root),
    ports,
    secrets,
  });
  const config = renderEjabberdConfig(context('test'));
  const devConfig = renderEjabberdConfig(context('dev'));

  it('puts the WebSocket and the API on their own loopback listeners', () => {
    expect(config).toMatch(
      /- port: 48003\n\s+ip: 127\.0\.0\.1\n\s+module: ejabberd_http\n\s+backlog: 128\n\s+request_handlers: \{\/ws: ejabberd_http_ws\}/,
    );
    expect(config).toMatch(
      /- port: 48004\n\s+ip: 127\.0\.0\.1\n\s+module: ejabberd_http\n\s+request_handlers: \{\/api: mod_http_api\}/,
    );
  });

  it("gives the control plane's component its own loopback listener on notify.chat.local", () => {
    for (const rendered of [config, devConfig]) {
      const { listen } = parse(rendered) as { listen: Array<Record<string, unknown>> };
      expect(listen).toContainEqual({
        port: 48012,
        ip: '127.0.0.1',
        module: 'ejabberd_service',
        hosts: { 'notify.chat.local': { password: secrets.ejabberdComponentSecret } },
      });
    }
    // The same port, domain and secret as the control plane's settings.
    const settings = controlPlaneSettings(ports, secrets);
    expect(settings.SVC_MESSAGING_COMPONENT_URL).toBe('xmpp://127.0.0.1:48012');
    expect(settings.SVC_MESSAGING_DOMAIN).toBe('notify.chat.local');
    expect(settings.SVC_MESSAGING_COMPONENT_SECRET).toBe(secrets.ejabberdComponentSecret);
    expect(ejabberd.ports).toContain('ejabberdComponent');
  });

  it('keeps offline messages, block lists, and hands the component to mod_svc_scope', () => {
    const { modules, shaper_rules: shaperRules } = parse(devConfig) as {
      modules: Record<string, unknown>;
      shaper_rules: Record<string, unknown>;
    };
    expect(modules).toMatchObject({
      // Where logins and org policy questions go, with ejabberd's secret (a file of its own).
      mod_svc_scope: {
        messaging_host: 'notify.chat.local',
        control_plane: expect.stringMatching(/control-plane\.json$/),
      },
      mod_offline: { access_max_user_messages: 'max_user_offline_messages' },
      mod_privacy: {},
      mod_blocking: {},
      // Business identities' bookmarks (docs/businesses.md).
      mod_private: {},
    });
    expect(shaperRules).toEqual({ max_user_offline_messages: 5000 });
  });

  it('keeps the Docker config in step: the same modules, messaging domain and offline limit', () => {
    const native = parse(devConfig) as {
      modules: Record<string, unknown>;
      shaper_rules: Record<string, unknown>;
      listen: Array<Record<string, unknown>>;
    };
    const docker = parse(
      readFileSync(join(REPO_ROOT, 'infra/compose/ejabberd.yml'), 'utf8'),
    ) as typeof native;
    expect(Object.keys(docker.modules).sort()).toEqual(Object.keys(native.modules).sort());
    for (const module of ['mod_offline', 'mod_privacy', 'mod_blocking', 'mod_private'])
      expect(docker.modules[module], module).toEqual(native.modules[module]);
    // The same options; the control plane's file lives elsewhere in the image.
    expect(docker.modules.mod_svc_scope).toEqual({
      ...(native.modules.mod_svc_scope as object),
      control_plane: '/run/svc-ejabberd/control-plane.json',
    });
    expect((docker as unknown as { auth_method: string[] }).auth_method).toEqual([
      'svc_api',
      'svc_control_plane',
    ]);
    expect(docker.shaper_rules).toEqual(native.shaper_rules);
    const componentHosts = (config: typeof native) =>
      config.listen
        .filter((listener) => listener.module === 'ejabberd_service')
        .map((listener) => Object.keys(listener.hosts as Record<string, unknown>));
    expect(componentHosts(docker)).toEqual(componentHosts(native));
  });

  it('lets the API run for its accounts only, each with its commands, knowing their digests alone', () => {
    expect(config).toContain('auth_method: [svc_api, svc_control_plane]');
    expect(config).toContain('control_plane_api: {user: [svc-api@chat.local]}');
    expect(config).toContain(
      'what: [create_room_with_opts, change_room_option, svc_revoke_user, svc_revoke_prefix,\n' +
        '           svc_flush_org, svc_set_archiving, svc_open_conversation,\n' +
        '           svc_set_conversation_staff, svc_set_conversation_titles, svc_set_room_places,\n' +
        '           svc_set_rooms_max_users, svc_set_bookmarks, private_set, status]',
    );
    // Without a credential: the health check's status, from loopback.
    expect(config).toMatch(
      /"health check":\n.*\n\s+who: \{access: \{allow: loopback\}\}\n\s+what: \[status\]/,
    );
    const digest = (secret: string) => createHash('sha256').update(secret).digest('hex');
    const { env } = ejabberd.launch(context('test'));
    expect(env.SVC_EJABBERD_API_ACCOUNTS).toBe(
      `svc-api=${digest(secrets.ejabberdApiSecret)},svc-operator=${digest(secrets.ejabberdOperatorSecret)}`,
    );
    expect(JSON.stringify(ejabberd.launch(context('test')))).not.toContain(secrets.ejabberdApiSecret);
  });

  it('serves chat.local with rooms on conference.chat.local that only the API creates', () => {
    expect(devConfig).toContain('hosts: [chat.local]\n');
    expect(config).toContain('host: conference.chat.local');
    expect(config).toContain('system_accounts: {user: [system@chat.local]}');
    expect(config).toContain('access_create: none');
    expect(config).toMatch(/max_users: 100000\n/);
    expect(config).toMatch(
      /default_room_options:\n\s+persistent: true\n\s+public: false\n\s+public_list: false\n\s+mam: true\n\s+allow_user_invites: false\n/,
    );
    expect(config).not.toContain('{{');
  });

  it('asks the control plane about every login from ejabberd itself, uncached', () => {
    for (const rendered of [config, devConfig]) {
      const parsed = parse(rendered) as Record<string, unknown>;
      expect(parsed).toMatchObject({ auth_method: ['svc_api', 'svc_control_plane'], auth_use_cache: false });
      // No external-auth programs of chat.local's: ejabberd_auth_svc_control_plane asks in process.
      expect(parsed).not.toHaveProperty('extauth_program');
      expect(parsed).not.toHaveProperty('extauth_pool_size');
    }
    expect(JSON.parse(renderControlPlaneConfig(context('test')))).toEqual({
      url: 'http://127.0.0.1:48011',
      secret: secrets.ejabberdAuthSecret,
    });
  });

  it('quotes a command for the shell that ejabberd runs external-auth programs with', () => {
    const words = [process.execPath, `/tmp/a dir/it's "here"/accept-all-auth.mjs`, '$HOME'];
    const split = spawnSync('sh', ['-c', `printf '%s\\n' ${shellCommand(words)}`], {
      encoding: 'utf8',
    }).stdout;
    expect(split.trimEnd().split('\n')).toEqual(words);
  });

  it("adds the login benchmark's hosts in the test profile only", () => {
    expect(config).toContain('hosts: [chat.local, bench.local, accept-all.local]\n');
    const { host_config: hosts } = parse(config) as {
      host_config: Record<string, Record<string, unknown>>;
    };
    expect(hosts['bench.local']).toMatchObject({ auth_method: 'internal', auth_password_format: 'scram' });
    // External auth that accepts anyone, with as many workers as chat.local's external auth had.
    expect(hosts['accept-all.local']).toMatchObject({
      auth_method: 'external',
      extauth_program: `${process.execPath} ${join(REPO_ROOT, 'ejabberd/accept-all-auth.mjs')}`,
      extauth_pool_size: EXTAUTH_POOL_SIZE,
    });
    const benchHosts = ['bench.local', 'accept-all.local'];
    // Neither host has chat.local's rooms, whose service name only one host can hold.
    for (const host of benchHosts) expect(hosts[host]?.modules).not.toHaveProperty('mod_muc');
    // Otherwise the modules a chat.local session goes through: the global list less the API and MUC.
    const { modules } = parse(config) as { modules: Record<string, unknown> };
    const sessionModules = Object.keys(modules)
      .filter((name) => !['mod_admin_extra', 'mod_muc_admin', 'mod_http_api', 'mod_muc'].includes(name))
      .sort();
    for (const host of benchHosts) {
      const hostModules = (hosts[host]?.modules ?? {}) as Record<string, unknown>;
      expect(Object.keys(hostModules).sort()).toEqual(sessionModules);
      // mod_privacy's caches are the node's: a host configured apart would resize chat.local's.
      expect(hostModules.mod_privacy).toEqual(modules.mod_privacy);
    }
    expect(devConfig).not.toContain('host_config');
    expect(devConfig).not.toContain('bench.local');
    expect(devConfig).not.toContain('accept-all');
  });
});

describe('LiveKit config', () => {
  const config = renderLivekitConfig({ profile: 'test', paths: stackPaths('test', '/repo'), ports, secrets });

  it('binds signalling to loopback on the profile ports', () => {
    expect(config).toContain('port: 48005\n');
    expect(config).toContain('bind_addresses: [127.0.0.1]');
    expect(config).toContain('tcp_port: 48006');
    expect(config).toContain('udp_port: 48007');
    expect(config).toContain('node_ip: 127.0.0.1');
    // A single node routes its rooms in memory.
    expect(config).not.toContain('redis:');
  });

  it('signs webhooks to the control plane with the generated key', () => {
    expect(config).toContain(`${secrets.livekitApiKey}: ${secrets.livekitApiSecret}`);
    expect(config).toContain(`api_key: ${secrets.livekitApiKey}`);
    expect(config).toContain('urls: [http://127.0.0.1:48011/internal/livekit/webhook]');
    expect(config).not.toContain('{{');
  });
});

describe('MinIO environment', () => {
  const context = { profile: 'test' as const, paths: stackPaths('test', '/repo'), ports, secrets };
  const env = minioEnvironment(context);

  it('posts bucket events to the control plane’s internal listener with its own bearer secret', () => {
    expect(env).toMatchObject({
      MINIO_NOTIFY_WEBHOOK_ENABLE_PRIMARY: 'on',
      MINIO_NOTIFY_WEBHOOK_ENDPOINT_PRIMARY: 'http://127.0.0.1:48011/internal/minio/events',
      MINIO_NOTIFY_WEBHOOK_AUTH_TOKEN_PRIMARY: secrets.minioWebhookSecret,
      MINIO_NOTIFY_WEBHOOK_QUEUE_LIMIT_PRIMARY: '100000',
      MINIO_API_SYNC_EVENTS: 'on',
    });
    // One word, or MinIO would send it verbatim instead of as "Bearer <token>".
    expect(env.MINIO_NOTIFY_WEBHOOK_AUTH_TOKEN_PRIMARY).toMatch(/^\S+$/);
  });

  it('queues undelivered events in an absolute dir of the profile, outside the data dir', () => {
    expect(env.MINIO_NOTIFY_WEBHOOK_QUEUE_DIR_PRIMARY).toBe('/repo/.stack/test/data/minio-queue');
    const args = minio.launch(context).args;
    expect(args[1]).toBe('/repo/.stack/test/data/minio');
  });

  it('passes the credentials in the environment, never as arguments', () => {
    const spec = minio.launch(context);
    expect(spec.env).toMatchObject({
      MINIO_ROOT_USER: secrets.minioRootUser,
      MINIO_ROOT_PASSWORD: secrets.minioRootPassword,
      MINIO_SITE_REGION: 'us-east-1',
    });
    expect(spec.args.join(' ')).not.toContain(secrets.minioRootPassword);
    expect(spec.args.join(' ')).not.toContain(secrets.minioWebhookSecret);
  });
});

describe('Redis config', () => {
  it('listens on loopback with a password and an append-only file in its data dir, snapshotting at most hourly', () => {
    const config = renderRedisConfig(ports, secrets.redisPassword, '/state/data/redis');
    expect(config.split('\n')).toEqual(
      expect.arrayContaining([
        'bind 127.0.0.1',
        'port 48002',
        `requirepass ${secrets.redisPassword}`,
        'dir "/state/data/redis"',
        'appendonly yes',
        'save 3600 1',
        'daemonize no',
      ]),
    );
  });
});

describe("the control plane's heap limit", () => {
  it("comes first in NODE_OPTIONS, so that the operator's own limit wins", () => {
    expect(withHeapLimit(undefined)).toBe(`--max-old-space-size=${CONTROL_PLANE_HEAP_MIB}`);
    const options = withHeapLimit('--max-old-space-size=1024');
    expect(options).toBe(`--max-old-space-size=${CONTROL_PLANE_HEAP_MIB} --max-old-space-size=1024`);
    // Node reads them in order: the last one is the heap node runs with.
    const { stdout } = spawnSync(
      process.execPath,
      ['-e', "process.stdout.write(String(require('v8').getHeapStatistics().heap_size_limit >> 20))"],
      { env: { ...process.env, NODE_OPTIONS: options }, encoding: 'utf8' },
    );
    expect(Number(stdout)).toBeGreaterThanOrEqual(1024);
  });
});

describe("PostgreSQL's shared buffers", () => {
  const GB = 1024 ** 3;
  it('take a quarter of the machine, from the 128 MB default up to 8 GB', () => {
    expect(sharedBuffersMb(256 * 1024 ** 2)).toBe(128);
    expect(sharedBuffersMb(512 * 1024 ** 2)).toBe(128);
    expect(sharedBuffersMb(2 * GB)).toBe(512);
    expect(sharedBuffersMb(24 * GB)).toBe(6 * 1024);
    expect(sharedBuffersMb(32 * GB)).toBe(8 * 1024);
    expect(sharedBuffersMb(256 * GB)).toBe(8 * 1024);
  });
});

describe('control-plane settings', () => {
  const settings = controlPlaneSettings(ports, secrets);

  it('are exactly the control plane configuration contract', () => {
    expect(settings).toEqual({
      SVC_HOST: '127.0.0.1',
      SVC_PORT: '48000',
      SVC_PUBLIC_URL: 'http://127.0.0.1:48000',
      SVC_INTERNAL_HOST: '127.0.0.1',
      SVC_INTERNAL_PORT: '48011',
      SVC_LOG_LEVEL: 'info',
      SVC_DATABASE_URL: `postgres://svc:${secrets.postgresPassword}@127.0.0.1:48001/svc`,
      SVC_REDIS_URL: `redis://:${secrets.redisPassword}@127.0.0.1:48002/0`,
      SVC_EJABBERD_AUTH_SECRET: secrets.ejabberdAuthSecret,
      SVC_MINIO_WEBHOOK_SECRET: secrets.minioWebhookSecret,
      SVC_SHIELD_HASH_KEY: secrets.shieldHashKey,
      SVC_EJABBERD_API_URL: 'http://127.0.0.1:48004/api',
      SVC_EJABBERD_API_SECRET: secrets.ejabberdApiSecret,
      SVC_CHAT_WS_URL: 'ws://127.0.0.1:48003/ws',
      SVC_CHAT_DOMAIN: 'chat.local',
      SVC_CHAT_MUC_DOMAIN: 'conference.chat.local',
      SVC_MESSAGING_COMPONENT_URL: 'xmpp://127.0.0.1:48012',
      SVC_MESSAGING_COMPONENT_SECRET: secrets.ejabberdComponentSecret,
      SVC_MESSAGING_DOMAIN: 'notify.chat.local',
      SVC_LIVEKIT_URL: 'http://127.0.0.1:48005',
      SVC_LIVEKIT_PUBLIC_URL: 'ws://127.0.0.1:48005',
      SVC_LIVEKIT_API_KEY: secrets.livekitApiKey,
      SVC_LIVEKIT_API_SECRET: secrets.livekitApiSecret,
      SVC_S3_ENDPOINT: 'http://127.0.0.1:48008',
      SVC_S3_PUBLIC_ENDPOINT: 'http://127.0.0.1:48008',
      SVC_S3_REGION: 'us-east-1',
      SVC_S3_ACCESS_KEY: secrets.minioRootUser,
      SVC_S3_SECRET_KEY: secrets.minioRootPassword,
      SVC_S3_BUCKET: 'svc-objects',
      SVC_FFPROBE_PATH: join(REPO_ROOT, '.stack', 'bin', 'ffprobe-svc'),
      SVC_SEALING_KEY: secrets.sealingKey,
      SVC_AI_BASE_URL: 'http://127.0.0.1:48013/v1',
      SVC_AI_MODERATION_URL: 'http://127.0.0.1:48014/v1',
      SVC_AI_API_KEY: secrets.aiApiKey,
      SVC_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8,::1/128',
      SVC_WEBHOOK_ALLOW_HTTP: 'true',
    });
  });

  it('survive the env file round trip', () => {
    expect(parseEnvFile(formatEnvFile(settings))).toEqual(settings);
  });

  it('are loaded back from a profile env file', () => {
    const root = mkdtempSync(join(tmpdir(), 'stack-env-'));
    try {
      mkdirSync(join(root, '.stack', 'test'), { recursive: true });
      writeControlPlaneEnv(join(root, '.stack', 'test', 'control-plane.env'), ports, secrets);
      expect(loadProfileEnv('test', root)).toEqual(settings);
      expect(() => loadProfileEnv('dev', root)).toThrow(/start the dev stack first/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
