import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative } from 'node:path';
import { StackError } from './errors.js';
import { findOnPath, privileged, type RunResult, run, runChecked } from './exec.js';
import { REPO_ROOT } from './paths.js';
import type { GoBinary, PythonEnv, ScriptBuild, ServerDefinition } from './servers/types.js';

/** Not servers, but needed on the machine: chromium for browser tests, docker-compose for self-hosters. */
export const TOOL_PACKAGES = ['chromium', 'docker-compose'] as const;

/** The test runner's Python tools: schemathesis, which fuzzes the API from its OpenAPI document. */
export const TOOL_PYTHON_ENVS: readonly PythonEnv[] = [
  { name: 'fuzz-venv', requirements: join(REPO_ROOT, 'e2e', 'fuzz', 'requirements.txt'), noDeps: [] },
];

/**
 * The distro's own units of the server packages, by package: the runner starts each server itself,
 * on loopback, so these must not start at boot or after an upgrade, where they would listen on all
 * addresses (ejabberd on 5222, 5269, 5280, 5443, 3478/udp and 1883; epmd on 4369).
 */
export const DISTRO_UNITS: Readonly<Record<string, readonly string[]>> = {
  postgresql: ['postgresql.service'],
  'redis-server': ['redis-server.service'],
  ejabberd: ['ejabberd.service'],
  'erlang-base': ['epmd.socket', 'epmd.service'],
  haproxy: ['haproxy.service'],
};

/**
 * Debian starts a package's service as it installs it. A policy-rc.d that answers 101 ("action
 * forbidden") prevents that, so the distro's own PostgreSQL cluster, Redis and ejabberd stay down.
 */
const POLICY_RC_D = '/usr/sbin/policy-rc.d';

/** Runs a system command as root; a non-zero exit is returned, for the caller to judge. */
export type SystemCommand = (command: string, args: readonly string[]) => Promise<RunResult>;

const runPrivileged: SystemCommand = (command, args) => run(...privileged(command, args));

/** How this machine starts services at boot. */
export interface InitSystem {
  /** systemd is the init (it creates /run/systemd/system as it boots). */
  systemd: boolean;
  hasInitScript(name: string): boolean;
}

export function currentInitSystem(): InitSystem {
  return {
    systemd: existsSync('/run/systemd/system'),
    hasInitScript: (name) => existsSync(join('/etc/init.d', name)),
  };
}

/** Runs the command; a failure is reported and returned, never thrown: it must not fail the install. */
async function attempt(system: SystemCommand, command: string, args: readonly string[]): Promise<boolean> {
  const result = await system(command, args);
  if (result.code !== 0)
    console.log(`${[command, ...args].join(' ')} failed (exit ${result.code}): ${result.stderr.trim()}`);
  return result.code === 0;
}

/**
 * Keeps the distro units of these packages from ever starting; running it again changes nothing.
 * Only units are stopped, never processes found by name: the runner's own servers are its detached
 * children, outside every unit's cgroup, so stopping a unit cannot touch them.
 */
export async function disableDistroUnits(
  packages: readonly string[],
  init: InitSystem,
  system: SystemCommand,
): Promise<void> {
  const units = packages.flatMap((pkg) => DISTRO_UNITS[pkg] ?? []);
  const disabled: string[] = [];
  if (init.systemd) {
    for (const unit of units) {
      const state = (await system('systemctl', ['is-enabled', unit])).stdout.trim();
      // Masked by an earlier run: nothing left to do. Empty or not-found: this release does not ship it.
      if (['masked', 'not-found', ''].includes(state)) continue;
      // --now stops one that an operator's own policy-rc.d let the install start. Masked as well, it
      // cannot start at all: not from an upgrade's maintainer script, nor as another unit's dependency
      // (ejabberd.service requires epmd.service).
      if (
        (await attempt(system, 'systemctl', ['disable', '--now', unit])) &&
        (await attempt(system, 'systemctl', ['mask', unit]))
      )
        disabled.push(unit);
    }
  } else {
    // Without systemd (sysvinit, or a container with no init like the one the tests run in) the
    // policy-rc.d kept the install from running the SysV scripts, so nothing is stopped. A service's
    // script has its name. update-rc.d turns the script's boot links into stop links, which an
    // upgrade's `update-rc.d defaults` keeps, and (through systemctl --root) removes the native unit's
    // boot link, for a later boot under systemd. A unit without a script (epmd's) stays as it is.
    const scripts = units
      .map((unit) => unit.replace(/\.service$/, ''))
      .filter((script) => init.hasInitScript(script));
    for (const script of scripts)
      if (await attempt(system, 'update-rc.d', [script, 'disable'])) disabled.push(script);
  }
  if (disabled.length > 0)
    console.log(`the distro's own services stay off (the runner starts its own): ${disabled.join(' ')}`);
}

async function isInstalled(pkg: string): Promise<boolean> {
  const query = await run('dpkg-query', ['--show', `--showformat=\${db:Status-Abbrev}`, pkg]);
  return query.code === 0 && query.stdout.startsWith('ii');
}

async function installedOf(packages: readonly string[]): Promise<string[]> {
  const installed: string[] = [];
  for (const pkg of packages) if (await isInstalled(pkg)) installed.push(pkg);
  return installed;
}

async function aptInstall(packages: readonly string[]): Promise<void> {
  console.log(`installing Debian packages: ${packages.join(' ')}`);
  await runChecked('apt-get update', ...privileged('apt-get', ['update']), { inherit: true });
  const ownPolicy = !existsSync(POLICY_RC_D);
  if (ownPolicy)
    await runChecked(
      `writing ${POLICY_RC_D}`,
      ...privileged('sh', [
        '-c',
        `printf '#!/bin/sh\\nexit 101\\n' > ${POLICY_RC_D} && chmod 755 ${POLICY_RC_D}`,
      ]),
    );
  try {
    await runChecked(
      'apt-get install',
      ...privileged('env', ['DEBIAN_FRONTEND=noninteractive', 'apt-get', 'install', '-y', ...packages]),
      { inherit: true },
    );
  } finally {
    if (ownPolicy) await runChecked(`removing ${POLICY_RC_D}`, ...privileged('rm', ['-f', POLICY_RC_D]));
    // After a failed install too: what it did install is not missing next time, so it is now or never.
    await disableDistroUnits(await installedOf(packages), currentInitSystem(), runPrivileged);
  }
}

/** Installs the missing packages. Those already there are the operator's: their services are left alone. */
async function ensurePackages(packages: readonly string[]): Promise<void> {
  const missing: string[] = [];
  for (const pkg of new Set(packages)) if (!(await isInstalled(pkg))) missing.push(pkg);
  if (missing.length > 0) await aptInstall(missing);
}

/**
 * Makes `target` with `build` unless it was made from the same pin: the stamp file beside it
 * (`<target>.<stamp>`) records the pin, so changing it (a version, a requirements file, a build
 * script) makes it again. `needs` runs first, to refuse at once when a tool is missing, and hands
 * `build` the tool it found. `build` works in a private directory and returns what it made there,
 * which then takes `target`'s place (a file in one rename), so a failed or interrupted build never
 * leaves a half-made one in place.
 */
async function stampedBuild<Tool>(
  target: string,
  { stamp, pin }: { stamp: string; pin: string },
  how: { message: string; needs: () => Tool; build: (buildDir: string, tool: Tool) => Promise<string> },
): Promise<void> {
  const stampFile = `${target}.${stamp}`;
  if (existsSync(target) && existsSync(stampFile) && readFileSync(stampFile, 'utf8').trim() === pin) return;
  const tool = how.needs();
  const buildDir = join(dirname(target), `.build-${basename(target)}`);
  rmSync(buildDir, { recursive: true, force: true });
  mkdirSync(buildDir, { recursive: true });
  const started = Date.now();
  console.log(how.message);
  const built = await how.build(buildDir, tool);
  // A directory cannot be renamed over a full one; a file can, and a running user never misses it.
  if (statSync(built).isDirectory()) rmSync(target, { recursive: true, force: true });
  renameSync(built, target);
  writeFileSync(stampFile, `${pin}\n`);
  rmSync(buildDir, { recursive: true, force: true });
  console.log(`made ${basename(target)} in ${Math.round((Date.now() - started) / 1000)} s`);
}

const sha256Of = (...parts: string[]) => {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(part);
  return hash.digest('hex');
};

/** Builds a Go server into .stack/bin with `go install <module>@<version>`. */
async function ensureGoBinary(binDir: string, binary: GoBinary): Promise<void> {
  const pin = `${binary.module}@${binary.version}`;
  await stampedBuild(
    join(binDir, binary.name),
    { stamp: 'version', pin },
    {
      message: `building ${binary.name} from ${pin} (a cold build takes several minutes)`,
      needs: () => {
        const go = findOnPath('go');
        if (go === undefined)
          throw new StackError(
            `Go >= 1.26 is needed to build ${binary.name} (Debian 12's golang package is too old): https://go.dev/dl/`,
          );
        return go;
      },
      build: async (buildDir, go) => {
        await runChecked(`building ${binary.name}`, go, ['install', pin], {
          cwd: buildDir,
          env: { ...process.env, GOBIN: buildDir },
        });
        return join(buildDir, binary.builtName);
      },
    },
  );
}

/** Builds a tool into .stack/bin with a build script of ours: the script's own text is the pin. */
async function ensureScriptBuild(binDir: string, tool: ScriptBuild): Promise<void> {
  await stampedBuild(
    join(binDir, tool.name),
    { stamp: 'script', pin: sha256Of(readFileSync(tool.script, 'utf8')) },
    {
      message: `building ${tool.name} with ${relative(REPO_ROOT, tool.script)} (${tool.takes})`,
      needs: () => undefined,
      build: async (buildDir) => {
        const built = join(buildDir, tool.name);
        await runChecked(`building ${tool.name}`, 'sh', [tool.script, built]);
        return built;
      },
    },
  );
}

/**
 * Makes a Python virtual environment in .stack/bin, pinned by the hash of its requirements: wheels
 * only, so nothing compiles.
 */
async function ensurePythonEnv(binDir: string, env: PythonEnv): Promise<void> {
  await stampedBuild(
    join(binDir, env.name),
    { stamp: 'requirements', pin: sha256Of(readFileSync(env.requirements, 'utf8'), env.noDeps.join('\n')) },
    {
      message: `installing ${env.name} from ${env.requirements} (wheels from PyPI)`,
      needs: () => {
        const python = findOnPath('python3');
        if (python === undefined) throw new StackError(`Python 3.10 or newer is needed for ${env.name}`);
        return python;
      },
      build: async (buildDir, python) => {
        await runChecked(`making ${env.name}`, python, ['-m', 'venv', buildDir]);
        // `python -m pip`, not bin/pip: scripts name the environment's path, and it moves once made (its
        // python finds the environment beside it wherever it is).
        const pip = [join(buildDir, 'bin', 'python'), '-m', 'pip', 'install'] as const;
        const flags = ['--disable-pip-version-check', '--no-input', '--only-binary=:all:'];
        await runChecked(
          `installing ${env.name}`,
          pip[0],
          [...pip.slice(1), ...flags, '-r', env.requirements],
          {
            inherit: true,
          },
        );
        if (env.noDeps.length > 0)
          await runChecked(
            `installing ${env.noDeps.join(' ')}`,
            pip[0],
            [...pip.slice(1), ...flags, '--no-deps', ...env.noDeps],
            { inherit: true },
          );
        return buildDir;
      },
    },
  );
}

/** Installs what the servers need: missing Debian packages, then the builds and Python environments in parallel. */
export async function installServers(
  servers: readonly ServerDefinition[],
  binDir: string,
  tools: { packages?: readonly string[]; pythonEnvs?: readonly PythonEnv[] } = {},
): Promise<void> {
  await ensurePackages([...servers.flatMap((server) => server.aptPackages), ...(tools.packages ?? [])]);
  mkdirSync(binDir, { recursive: true });
  const pythonEnvs = [
    ...servers.flatMap((server) => (server.pythonEnv ? [server.pythonEnv] : [])),
    ...(tools.pythonEnvs ?? []),
  ];
  const builds = await Promise.allSettled([
    ...servers.flatMap((server) => (server.goBinary ? [ensureGoBinary(binDir, server.goBinary)] : [])),
    ...servers.flatMap((server) =>
      server.scriptBuild ? [ensureScriptBuild(binDir, server.scriptBuild)] : [],
    ),
    ...pythonEnvs.map((env) => ensurePythonEnv(binDir, env)),
  ]);
  const failures = builds.flatMap((build) => (build.status === 'rejected' ? [build.reason as Error] : []));
  if (failures.length > 0) throw new StackError(failures.map((failure) => failure.message).join('\n\n'));
}
