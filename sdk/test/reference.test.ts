import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';

// The generated reference (`npm run docs -w sdk`): TypeDoc with warnings as errors, so that a public
// type left unexported or a comment TypeDoc cannot read fails here rather than in the published docs.

const SDK = join(import.meta.dirname, '..');
const out = mkdtempSync(join(tmpdir(), 'sdk-reference-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

it('generates the reference of every entry point without a warning', async () => {
  const typedoc = join(SDK, '..', 'node_modules', 'typedoc', 'bin', 'typedoc');
  await promisify(execFile)(process.execPath, [typedoc, '--out', out], { cwd: SDK });
  for (const page of [
    'functions/index.createServerClient.html',
    'functions/index.createUserClient.html',
    'functions/index.verifyWebhook.html',
    'functions/chat.connectChat.html',
    'functions/live.joinLive.html',
    'interfaces/live.LiveOptions.html',
  ])
    expect(existsSync(join(out, page)), page).toBe(true);
}, 120_000);
