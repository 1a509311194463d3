import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { StackError } from './errors.js';
import { findOnPath, privileged, run, runChecked } from './exec.js';
import { REPO_ROOT } from './paths.js';
import type { GoBinary, PythonEnv, ServerDefinition } from './servers/types.js';

/** Not servers, but needed on the machine: chromium for browser tests, docker-compose for self-hosters. */
export const TOOL_PACKAGES = ['chromium', 'docker-compose'] as const;

/** The test runner's Python tools: schemathesis, which fuzzes the API from its OpenAPI document. */
export const TOOL_PYTHON_ENVS: readonly PythonEnv[] = [
  { name: 'fuzz-venv', requirements: join(REPO_ROOT, 'e2e', 'fuzz', 'requirements.txt'), noDeps: [] },
];

/**
 * Debian starts a package's service as it installs it. A policy-rc.d that answers 101 ("action
 * forbidden") prevents that, so the distro's own PostgreSQL cluster, Redis and ejabberd stay down.
 */
const POLICY_RC_D = '/usr/sbin/policy-rc.d';

async function isInstalled(pkg: string): Promise<boolean> {
  const query = await run('dpkg-query', ['--show', `--showformat=\${db:Status-Abbrev}`, pkg]);
  return query.code === 0 && query.stdout.startsWith('ii');
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
  }
}

async function ensurePackages(packages: readonly string[]): Promise<void> {
  const missing: string[] = [];
  for (const pkg of new Set(packages)) if (!(await isInstalled(pkg))) missing.push(pkg);
  if (missing.length > 0) await aptInstall(missing);
}

/**
 * Builds a Go server into .stack/bin unless the binary there was built from the same pin; the
 * stamp file next to it records the pin, so changing the version rebuilds.
 */
async function ensureGoBinary(binDir: string, binary: GoBinary): Promise<void> {
  const target = join(binDir, binary.name);
  const stampFile = `${target}.version`;
  const pin = `${binary.module}@${binary.version}`;
  if (existsSync(target) && existsSync(stampFile) && readFileSync(stampFile, 'utf8').trim() === pin) return;
  const go = findOnPath('go');
  if (go === undefined)
    throw new StackError(
      `Go >= 1.26 is needed to build ${binary.name} (Debian 12's golang package is too old): https://go.dev/dl/`,
    );
  // A private GOBIN, so a failed or interrupted build never leaves a half-written binary at target.
  const buildDir = join(binDir, `.build-${binary.name}`);
  rmSync(buildDir, { recursive: true, force: true });
  mkdirSync(buildDir, { recursive: true });
  const started = Date.now();
  console.log(`building ${binary.name} from ${pin} (a cold build takes several minutes)`);
  await runChecked(`building ${binary.name}`, go, ['install', pin], {
    cwd: buildDir,
    env: { ...process.env, GOBIN: buildDir },
  });
  renameSync(join(buildDir, binary.builtName), target);
  writeFileSync(stampFile, `${pin}\n`);
  rmSync(buildDir, { recursive: true, force: true });
  console.log(`built ${binary.name} in ${Math.round((Date.now() - started) / 1000)} s`);
}

/**
 * Makes a Python virtual environment in .stack/bin unless the one there was made from the same
 * requirements (a stamp of their hash beside it): wheels only, so nothing compiles, and a failed or
 * interrupted install never leaves a half-made environment in place.
 */
async function ensurePythonEnv(binDir: string, env: PythonEnv): Promise<void> {
  const target = join(binDir, env.name);
  const stampFile = `${target}.requirements`;
  const pin = createHash('sha256')
    .update(readFileSync(env.requirements))
    .update(env.noDeps.join('\n'))
    .digest('hex');
  if (existsSync(target) && existsSync(stampFile) && readFileSync(stampFile, 'utf8').trim() === pin) return;
  const python = findOnPath('python3');
  if (python === undefined) throw new StackError(`Python 3.10 or newer is needed for ${env.name}`);
  const buildDir = join(binDir, `.build-${env.name}`);
  rmSync(buildDir, { recursive: true, force: true });
  const started = Date.now();
  console.log(`installing ${env.name} from ${env.requirements} (wheels from PyPI)`);
  await runChecked(`making ${env.name}`, python, ['-m', 'venv', buildDir]);
  // `python -m pip`, not bin/pip: scripts name the environment's path, and it moves once made (its
  // python finds the environment beside it wherever it is).
  const pip = [join(buildDir, 'bin', 'python'), '-m', 'pip', 'install'] as const;
  const flags = ['--disable-pip-version-check', '--no-input', '--only-binary=:all:'];
  await runChecked(`installing ${env.name}`, pip[0], [...pip.slice(1), ...flags, '-r', env.requirements], {
    inherit: true,
  });
  if (env.noDeps.length > 0)
    await runChecked(
      `installing ${env.noDeps.join(' ')}`,
      pip[0],
      [...pip.slice(1), ...flags, '--no-deps', ...env.noDeps],
      {
        inherit: true,
      },
    );
  rmSync(target, { recursive: true, force: true });
  renameSync(buildDir, target);
  writeFileSync(stampFile, `${pin}\n`);
  console.log(`installed ${env.name} in ${Math.round((Date.now() - started) / 1000)} s`);
}

/** Installs what the servers need: missing Debian packages, then the Go builds and Python environments in parallel. */
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
    ...pythonEnvs.map((env) => ensurePythonEnv(binDir, env)),
  ]);
  const failures = builds.flatMap((build) => (build.status === 'rejected' ? [build.reason as Error] : []));
  if (failures.length > 0) throw new StackError(failures.map((failure) => failure.message).join('\n\n'));
}
