// Entry point of the root npm scripts (start, test, stack, admin, backup, restore). Plain Node without dependencies,
// because a fresh clone has no node_modules yet: it installs them when package-lock.json changed,
// then hands every command to the TypeScript runner (infra/src/cli.ts) through tsx.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { constants } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const nodeModules = join(root, 'node_modules');
// Inside node_modules, so that deleting node_modules also forgets which lockfile it matched.
const stampFile = join(nodeModules, '.svc-package-lock.sha256');

function lockfileHash() {
  return createHash('sha256')
    .update(readFileSync(join(root, 'package-lock.json')))
    .digest('hex');
}

function ensureDependencies() {
  const wanted = lockfileHash();
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8').trim() === wanted) return;
  console.error('installing dependencies (npm install): node_modules does not match package-lock.json');
  // Not `npm ci`: the lockfile records only the platform packages the registry here serves (biome's
  // other builds are missing from it), which `npm ci` refuses; `npm install` installs the same locked
  // versions and leaves an in-sync lockfile untouched.
  const install = spawnSync('npm', ['install', '--no-audit', '--no-fund'], {
    cwd: root,
    stdio: 'inherit',
    // Browser tests use the system chromium; Playwright's own download would be ~150 MB.
    env: { ...process.env, PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD: '1' },
  });
  if (install.status !== 0) {
    console.error(`npm install failed (exit ${install.status ?? install.signal})`);
    process.exit(install.status || 1);
  }
  writeFileSync(stampFile, `${wanted}\n`);
}

ensureDependencies();
const child = spawn(
  join(nodeModules, '.bin', 'tsx'),
  [join(root, 'infra', 'src', 'cli.ts'), ...process.argv.slice(2)],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
// Ctrl-C reaches the runner directly (same process group); SIGTERM and SIGHUP are sent to us alone.
process.on('SIGINT', () => {});
for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? 128 + (signal ? constants.signals[signal] : 0)));
