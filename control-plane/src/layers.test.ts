import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The layers point one way: app → http → modules → platform → db and adapters. This reads every
 * import of the control plane's sources and fails on any arrow back.
 */
const SRC = new URL('.', import.meta.url).pathname;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** Every relative import of a file, as a path below src (e.g. `platform/errors.ts`). */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/from '(\.[^']+)'/g)].map((match) =>
    relative(SRC, resolve(dirname(file), match[1]!)).replace(/\.js$/, '.ts'),
  );
}

const layerOf = (path: string) => path.split('/')[0]!;

/** Which layers each layer may import. */
const ALLOWED: Record<string, (target: string, source: string) => boolean> = {
  // Errors import nothing, so a server adapter may throw the one error type every layer renders; the
  // address rules are pure too, and the webhook sender applies them where it connects.
  adapters: (target) =>
    layerOf(target) === 'adapters' || ['platform/errors.ts', 'platform/addresses.ts'].includes(target),
  db: (target) => layerOf(target) === 'db',
  config: (target) => ['config', 'platform'].includes(layerOf(target)),
  platform: (target) => ['platform', 'db', 'adapters'].includes(layerOf(target)),
  // A module uses another module only through its service (and its schema's types), never its store.
  modules: (target, source) =>
    ['platform', 'adapters'].includes(layerOf(target)) ||
    (layerOf(target) === 'modules' &&
      (target.split('/')[1] === source.split('/')[1] || !target.endsWith('/store.ts'))),
  http: (target) => ['http', 'platform'].includes(layerOf(target)),
  // The dashboard is a surface for people beside the API's: it calls modules' services (never their
  // stores) and reuses the HTTP layer's validation; index.ts alone takes the container to wire it.
  dashboard: (target, source) =>
    ['dashboard', 'http', 'platform'].includes(layerOf(target)) ||
    (layerOf(target) === 'modules' && !target.endsWith('/store.ts')) ||
    (source === 'dashboard/index.ts' && target === 'container.ts'),
};

describe('the control plane’s layers', () => {
  const files = sources(SRC).map((file) => relative(SRC, file));

  it('are all known', () => {
    const layers = new Set(files.filter((file) => file.includes('/')).map(layerOf));
    expect([...layers].sort()).toEqual([
      'adapters',
      'cli',
      'config',
      'dashboard',
      'db',
      'http',
      'modules',
      'platform',
    ]);
  });

  it.each(Object.keys(ALLOWED))('%s imports nothing above it', (layer) => {
    const backwards = files
      .filter((file) => layerOf(file) === layer)
      .flatMap((file) =>
        importsOf(join(SRC, file))
          .filter((target) => !ALLOWED[layer]!(target, file))
          .map((target) => `${file} → ${target}`),
      );
    expect(backwards).toEqual([]);
  });

  it('notices an arrow back', () => {
    expect(ALLOWED.modules!('http/pipeline.ts', 'modules/chat/service.ts')).toBe(false);
    expect(ALLOWED.modules!('modules/realtime/store.ts', 'modules/chat/service.ts')).toBe(false);
    expect(ALLOWED.http!('modules/chat/service.ts', 'http/auth.ts')).toBe(false);
    expect(ALLOWED.platform!('modules/accounts/service.ts', 'platform/caller.ts')).toBe(false);
  });
});

describe('transactions', () => {
  /** slonik's `transaction(`: the one call that switches promise hooks on for the whole process. */
  const slonikTransaction = /\.transaction\(/;

  it('all go through db/transaction.ts', () => {
    const offenders = sources(SRC)
      .filter((file) => slonikTransaction.test(readFileSync(file, 'utf8')))
      .map((file) => relative(SRC, file));
    expect(offenders).toEqual([]);
  });

  it('notices a slonik transaction', () => {
    expect(slonikTransaction.test('await deps.pool.transaction(async (tx) => {')).toBe(true);
    expect(slonikTransaction.test('await inTransaction(deps.pool, async (tx) => {')).toBe(false);
  });
});
