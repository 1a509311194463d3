import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Browser } from 'playwright';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Container } from '../../control-plane/src/container.js';
import { launchChromium } from '../../e2e/support/browser.js';
import { createCustomer, openContainer, stackSettings } from '../../e2e/support/stack.js';
import { browserBundle } from './support/bundle.js';

// The package as an integrator gets it: `npm pack`, installed into a project outside the workspace
// with the helpers' peers, whose quick start (the README's own code blocks) type-checks and runs
// against the test stack: the server half on Node, the client half bundled into a page in Chromium.

const run = promisify(execFile);
const SDK = join(import.meta.dirname, '..');
const TSC = join(SDK, '..', 'node_modules', 'typescript', 'bin', 'tsc');
const QUICK_START_FILES = ['quick-start/server.ts', 'quick-start/client.ts'];

/** The README's code blocks that begin with `// quick-start/<file>`, by file. */
function quickStartFromReadme(): Record<string, string> {
  const readme = readFileSync(join(SDK, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/```ts\n\/\/ (quick-start\/[\w.-]+)\n([\s\S]*?)```/g)];
  return Object.fromEntries(blocks.map(([, file, code]) => [file!, code!]));
}

/** The app's server: the quick start's functions behind its two endpoints, and the page. */
const HARNESS = `import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import { chatCredential, liveToken } from './dist/server.js';

const page = '<!doctype html><meta charset="utf-8"><script type="module">' +
  'import { start } from "/client.js"; window.lines = [];' +
  'start((line) => window.lines.push(line)).catch((error) => window.lines.push("failed: " + error));</script>';
const server = createServer(async (request, response) => {
  const url = new URL(request.url, 'http://app');
  const send = (type, body) => response.writeHead(200, { 'content-type': type }).end(body);
  if (url.pathname === '/') return send('text/html', page);
  if (url.pathname === '/client.js') return send('text/javascript', readFileSync('client.bundle.js'));
  if (url.pathname === '/api/chat-credential') return send('application/json', JSON.stringify(await chatCredential('user-42')));
  if (url.pathname === '/api/live-token')
    return send('application/json', JSON.stringify(await liveToken('user-42', url.searchParams.get('room'))));
  response.writeHead(404).end();
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

let container: Container;
let scratch: string;
let browser: Browser | undefined;
let harness: ChildProcess | undefined;
beforeAll(async () => {
  container = await openContainer();
  scratch = mkdtempSync(join(tmpdir(), 'sdk-scratch-'));
});
afterAll(async () => {
  harness?.kill();
  await browser?.close();
  await container.close();
  rmSync(scratch, { recursive: true, force: true });
});

it('installs from its tarball into another project, whose quick start type-checks and runs', async () => {
  const quickStart = quickStartFromReadme();
  expect(Object.keys(quickStart).sort()).toEqual([...QUICK_START_FILES].sort());

  await run('npm', ['pack', '--pack-destination', scratch], { cwd: SDK });
  const tarball = readdirSync(scratch).find((file) => file.endsWith('.tgz'));
  if (tarball === undefined) throw new Error('npm pack wrote no tarball');
  writeFileSync(
    join(scratch, 'package.json'),
    JSON.stringify({ name: 'scratch', private: true, type: 'module' }),
  );
  // The peers the helpers need, at the versions the SDK is tested with, and Node's typings.
  const tested = {
    ...JSON.parse(readFileSync(join(SDK, '..', 'package.json'), 'utf8')).devDependencies,
    ...JSON.parse(readFileSync(join(SDK, 'package.json'), 'utf8')).devDependencies,
  };
  const peers = ['@xmpp/client', '@types/xmpp__client', 'livekit-client', '@types/node'].map(
    (name) => `${name}@${tested[name]}`,
  );
  await run('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', `./${tarball}`, ...peers], {
    cwd: scratch,
  });
  mkdirSync(join(scratch, 'quick-start'));
  for (const [file, code] of Object.entries(quickStart)) writeFileSync(join(scratch, file), code);
  writeFileSync(
    join(scratch, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        lib: ['ES2023', 'DOM'],
        types: ['node'],
        // As app templates set it: livekit-client's declarations name packages it does not ship.
        skipLibCheck: true,
        rootDir: 'quick-start',
        outDir: 'dist',
      },
      files: QUICK_START_FILES,
    }),
  );
  await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: scratch });

  writeFileSync(
    join(scratch, 'client.bundle.js'),
    await browserBundle({ contents: "export * from './dist/client.js';", resolveDir: scratch }),
  );
  writeFileSync(join(scratch, 'harness.mjs'), HARNESS);
  const customer = await createCustomer(container);
  harness = spawn(process.execPath, ['harness.mjs'], {
    cwd: scratch,
    env: { SVC_URL: stackSettings().SVC_PUBLIC_URL, SVC_SECRET_KEY: customer.token, PATH: process.env.PATH },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [port] = (await once(harness.stdout!, 'data')) as [Buffer];

  browser = await launchChromium();
  const page = await browser.newPage();
  await page.goto(`http://127.0.0.1:${port.toString().trim()}/`);
  const lines = () => page.evaluate(() => (window as unknown as { lines?: string[] }).lines ?? []);
  await expect
    .poll(lines, { timeout: 30_000 })
    .toEqual(
      expect.arrayContaining([
        'message: note to self',
        expect.stringMatching(/^joined \w+\.stage as user-42$/),
      ]),
    );
  expect((await lines()).filter((line) => line.startsWith('failed'))).toEqual([]);
}, 240_000);
