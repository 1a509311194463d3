import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Container } from '../../control-plane/src/container.js';
import { createCustomer, openContainer, stackSettings } from '../../e2e/support/stack.js';

// The package as an integrator gets it: `npm pack`, installed into a project outside the workspace,
// whose quick start (the README's, server side) type-checks and runs against the test stack.

const run = promisify(execFile);
const SDK = join(import.meta.dirname, '..');
const TSC = join(SDK, '..', 'node_modules', 'typescript', 'bin', 'tsc');

const QUICK_START = `import { createServerClient, SvcApiError } from '@svc-bundle/sdk';

const svc = createServerClient({ baseUrl: process.env.SVC_URL!, secretKey: process.env.SVC_SECRET_KEY! });
const chat = await svc.chat.tokens.create({ body: { user_id: 'user-42' } });
const live = await svc.live.tokens.create({ body: { room: 'stage', identity: 'user-42', publish: true } });
let refused = '';
try {
  await svc.storage.objects.read({ path: { object_id: 'obj_missing00000000000000' } });
} catch (error) {
  if (error instanceof SvcApiError) refused = error.type;
}
console.log(JSON.stringify({ jid: chat.data.jid, room: live.data.room, cost: chat.costUsd, refused }));
`;

let container: Container;
let scratch: string;
beforeAll(async () => {
  container = await openContainer();
  scratch = mkdtempSync(join(tmpdir(), 'sdk-scratch-'));
});
afterAll(async () => {
  await container.close();
  rmSync(scratch, { recursive: true, force: true });
});

it('installs from its tarball into another project, whose quick start type-checks and runs', async () => {
  await run('npm', ['pack', '--pack-destination', scratch], { cwd: SDK });
  const tarball = readdirSync(scratch).find((file) => file.endsWith('.tgz'));
  if (tarball === undefined) throw new Error('npm pack wrote no tarball');
  writeFileSync(
    join(scratch, 'package.json'),
    JSON.stringify({ name: 'scratch', private: true, type: 'module' }),
  );
  await run('npm', ['install', '--no-audit', '--no-fund', '--ignore-scripts', `./${tarball}`], {
    cwd: scratch,
  });
  writeFileSync(join(scratch, 'quick-start.ts'), QUICK_START);
  writeFileSync(
    join(scratch, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        lib: ['ES2023', 'DOM'],
        types: [],
        outDir: 'dist',
      },
      files: ['quick-start.ts', 'env.d.ts'],
    }),
  );
  // Just enough of Node's typings for process.env, so that the check needs nothing but the package.
  writeFileSync(
    join(scratch, 'env.d.ts'),
    'declare const process: { env: Record<string, string | undefined> };\n',
  );
  await run(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: scratch });

  const customer = await createCustomer(container);
  const { stdout } = await run(process.execPath, ['dist/quick-start.js'], {
    cwd: scratch,
    env: { SVC_URL: stackSettings().SVC_PUBLIC_URL, SVC_SECRET_KEY: customer.token, PATH: process.env.PATH },
  });
  expect(JSON.parse(stdout)).toMatchObject({
    jid: expect.stringMatching(/\.user-42@chat\.local$/),
    room: expect.stringMatching(/\.stage$/),
    cost: expect.stringMatching(/^\d+\.\d{6}$/),
    refused: 'not_found',
  });
}, 180_000);
