import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DISTRO_UNITS, disableDistroUnits, type InitSystem, type SystemCommand } from '../src/install.js';
import { SERVERS } from '../src/servers/index.js';

/**
 * Records the commands instead of running them (systemd cannot run in a test container). `states` are
 * what `systemctl is-enabled` prints per unit (enabled unless named; '' for a unit that does not
 * exist); `failing` are command lines that exit 1.
 */
function recorder({
  states = {},
  failing = [],
}: {
  states?: Record<string, string>;
  failing?: string[];
} = {}) {
  const commands: string[] = [];
  const system: SystemCommand = async (command, args) => {
    const line = [command, ...args].join(' ');
    commands.push(line);
    if (command === 'systemctl' && args[0] === 'is-enabled') {
      const state = states[args[1] as string] ?? 'enabled';
      return { code: state === 'enabled' ? 0 : 1, stdout: state && `${state}\n`, stderr: '' };
    }
    return { code: failing.includes(line) ? 1 : 0, stdout: '', stderr: '' };
  };
  return { commands, system };
}

const systemd: InitSystem = { systemd: true, hasInitScript: () => true };

describe('the distro units of installed packages', () => {
  it('are disabled, stopped and masked under systemd, for those packages only', async () => {
    const { commands, system } = recorder();
    await disableDistroUnits(['ejabberd', 'erlang-base', 'chromium'], systemd, system);
    expect(commands).toEqual(
      ['ejabberd.service', 'epmd.socket', 'epmd.service'].flatMap((unit) => [
        `systemctl is-enabled ${unit}`,
        `systemctl disable --now ${unit}`,
        `systemctl mask ${unit}`,
      ]),
    );
  });

  it('are left alone once masked, and skipped when this release does not ship them', async () => {
    const { commands, system } = recorder({ states: { 'ejabberd.service': 'masked', 'epmd.socket': '' } });
    await disableDistroUnits(['ejabberd', 'erlang-base'], systemd, system);
    expect(commands).toEqual([
      'systemctl is-enabled ejabberd.service',
      'systemctl is-enabled epmd.socket',
      'systemctl is-enabled epmd.service',
      'systemctl disable --now epmd.service',
      'systemctl mask epmd.service',
    ]);
  });

  it('are not masked when disabling fails, and the failure does not fail the install', async () => {
    const { commands, system } = recorder({ failing: ['systemctl disable --now redis-server.service'] });
    await expect(disableDistroUnits(['redis-server', 'haproxy'], systemd, system)).resolves.toBeUndefined();
    expect(commands).not.toContain('systemctl mask redis-server.service');
    expect(commands).toContain('systemctl mask haproxy.service');
  });

  it('have their SysV scripts disabled without systemd, and nothing stopped', async () => {
    const { commands, system } = recorder();
    // Redis without its script; epmd has none in Debian.
    const sysvinit: InitSystem = {
      systemd: false,
      hasInitScript: (name) => ['postgresql', 'ejabberd'].includes(name),
    };
    await disableDistroUnits(['postgresql', 'ejabberd', 'erlang-base', 'redis-server'], sysvinit, system);
    expect(commands).toEqual(['update-rc.d postgresql disable', 'update-rc.d ejabberd disable']);
  });

  it('are listed only for packages a server installs', () => {
    const serverPackages = SERVERS.flatMap((server) => server.aptPackages);
    expect(Object.keys(DISTRO_UNITS).filter((pkg) => !serverPackages.includes(pkg))).toEqual([]);
  });

  it('are the unit files the installed packages put on this machine', () => {
    const installed = Object.keys(DISTRO_UNITS).filter((pkg) =>
      spawnSync('dpkg-query', ['--show', `--showformat=\${db:Status-Abbrev}`, pkg], {
        encoding: 'utf8',
      }).stdout.startsWith('ii'),
    );
    const missing = installed
      .flatMap((pkg) => DISTRO_UNITS[pkg] ?? [])
      .filter((unit) => !existsSync(`/lib/systemd/system/${unit}`));
    expect(missing).toEqual([]);
  });
});
