import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { stackPaths } from '../src/paths.js';
import { portBase, portMap } from '../src/ports.js';
import type { Profile } from '../src/profile.js';
import { ensureSecrets } from '../src/secrets.js';
import { controlPlane } from '../src/servers/control-plane.js';
import { distributionPorts, ejabberd, renderEjabberdConfig } from '../src/servers/ejabberd.js';
import { profileServers } from '../src/servers/index.js';
import { renderLivekitConfig } from '../src/servers/livekit.js';
import { minio, minioEnvironment } from '../src/servers/minio.js';
import { renderProxyConfig } from '../src/servers/proxy.js';
import { instancesOf, type StackContext } from '../src/servers/types.js';
import { unitsOf } from '../src/stack.js';

const secretsDir = mkdtempSync(join(tmpdir(), 'scale-secrets-'));
const secrets = ensureSecrets(join(secretsDir, 'secrets.json'));
rmSync(secretsDir, { recursive: true });

function contextOf(profile: Profile): StackContext {
  return { profile, paths: stackPaths(profile, '/repo'), ports: portMap(portBase(profile, {})), secrets };
}
const scale = contextOf('scale');
const [a, b] = instancesOf('scale');
const instanceA = { ...scale, instance: a };
const instanceB = { ...scale, instance: b };

describe('the scale profile', () => {
  it('gives each instance its own block of ports after the profile block', () => {
    expect(instancesOf('test')).toEqual([]);
    expect(instancesOf('scale').map((instance) => [instance.name, instance.ports.controlPlane])).toEqual([
      ['a', 29020],
      ['b', 29040],
    ]);
    expect(b?.ports.ejabberdDistribution).toBe(29050);
  });

  it('runs two of each replicated server, behind a proxy that only it has', () => {
    const names = (profile: Profile) =>
      unitsOf(contextOf(profile), profileServers(profile)).map((u) => u.name);
    expect(names('scale')).toEqual([
      'postgres',
      'redis',
      'ejabberd-a',
      'ejabberd-b',
      'livekit-a',
      'livekit-b',
      'minio',
      'ai',
      'proxy',
      'control-plane-a',
      'control-plane-b',
    ]);
    expect(names('test')).toEqual([
      'postgres',
      'redis',
      'ejabberd',
      'livekit',
      'minio',
      'ai',
      'control-plane',
    ]);
  });

  it('starts each control plane on its own ports, reached at the proxy', () => {
    const { env } = controlPlane.launch(instanceB);
    expect(env).toMatchObject({
      SVC_PORT: '29040',
      SVC_INTERNAL_PORT: '29051',
      SVC_PUBLIC_URL: 'http://127.0.0.1:29000',
      SVC_EJABBERD_API_URL: 'http://127.0.0.1:29004/api',
      SVC_MESSAGING_COMPONENT_URL: 'xmpp://127.0.0.1:29012',
      SVC_LIVEKIT_URL: 'http://127.0.0.1:29005',
      SVC_TRUST_PROXY: '127.0.0.1',
    });
    expect(controlPlane.launch(contextOf('test')).env.SVC_TRUST_PROXY).toBeUndefined();
  });

  it('names every ejabberd node and the joiner in one distribution table', () => {
    expect(distributionPorts(contextOf('test'))).toBe('svc-test:28010');
    expect(distributionPorts(instanceA)).toBe('svc-scale-a:29030,svc-scale-b:29050,svc-scale-ctl:29010');
    const { args, env } = ejabberd.launch(instanceB);
    expect(args.slice(0, 2)).toEqual(['-sname', 'svc-scale-b@localhost']);
    expect(args).toContain('svc_epmd');
    expect(env.SVC_DIST_PORTS).toBe(distributionPorts(instanceA));
    expect(env.HOME).toBe('/repo/.stack/scale/data/ejabberd-b');
  });

  it("puts each ejabberd node's listeners on its own ports, and its logins through the proxy", () => {
    const config = parse(renderEjabberdConfig(instanceB)) as { listen: { port: number }[] };
    expect(config.listen.map((listener) => listener.port).sort()).toEqual([29043, 29044, 29052]);
    expect(renderEjabberdConfig(instanceB)).toContain('hosts: [chat.local]\n');
  });

  it('routes the LiveKit nodes through the shared Redis, in a database of their own', () => {
    const config = parse(renderLivekitConfig(instanceA)) as Record<string, Record<string, unknown>>;
    expect(config.port).toBe(29025);
    expect(config.rtc).toMatchObject({ tcp_port: 29026, udp_port: 29027, node_ip: '127.0.0.1' });
    expect(config.redis).toEqual({ address: '127.0.0.1:29002', password: secrets.redisPassword, db: 1 });
    expect(config.webhook?.urls).toEqual(['http://127.0.0.1:29011/internal/livekit/webhook']);
  });

  it('erasure-codes MinIO over four drives in the profile, checked for write quorum', () => {
    expect(minio.launch(scale).args[1]).toBe('/repo/.stack/scale/data/minio/d{1...4}');
    expect(minioEnvironment(scale).MINIO_ROOTDISK_THRESHOLD_SIZE).toBe('1MiB');
    expect(minio.launch(contextOf('test')).args[1]).toBe('/repo/.stack/test/data/minio');
    expect(minioEnvironment(contextOf('test')).MINIO_ROOTDISK_THRESHOLD_SIZE).toBeUndefined();
  });
});

describe('the proxy config', () => {
  const config = renderProxyConfig(scale.ports, instancesOf('scale'));

  it('fronts each replicated listener at the profile port with one server per instance', () => {
    expect(config).toContain('frontend control_plane\n    bind 127.0.0.1:29000\n');
    expect(config).toContain('    server control_plane_a 127.0.0.1:29020 check\n');
    expect(config).toContain('    server control_plane_b 127.0.0.1:29040 check\n');
    expect(config).toContain('    server ejabberd_ws_b 127.0.0.1:29043 check\n');
    expect(config).toContain(
      'frontend ejabberd_component\n    mode tcp\n    option tcplog\n    bind 127.0.0.1:29012\n',
    );
    expect(config).toContain('    server livekit_a 127.0.0.1:29025 check\n');
  });

  it("tells the control planes each client's address", () => {
    expect(config).toMatch(/backend control_plane\n( {4}.*\n)* {4}option forwardfor\n/);
  });

  it('retries a request on another instance only when it never reached one', () => {
    expect(config).toContain('retry-on conn-failure\n');
    expect(config).not.toMatch(/retry-on .*(empty-response|response-timeout)/);
  });

  it('is valid for HAProxy (installed by the runner for the scale profile)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'haproxy-'));
    try {
      writeFileSync(join(dir, 'haproxy.cfg'), config);
      const check = spawnSync('/usr/sbin/haproxy', ['-c', '-f', join(dir, 'haproxy.cfg')], {
        encoding: 'utf8',
      });
      expect(check.stderr + check.stdout).toContain('Configuration file is valid');
      expect(check.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});
