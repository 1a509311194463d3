import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestContext } from '../../control-plane/test/support.js';
import { generate } from '../scripts/generator.js';

const GENERATED = join(import.meta.dirname, '..', 'src', 'generated');

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

describe('the SDK’s generated code', () => {
  it('is what the API’s OpenAPI document generates now (else: npm run generate -w sdk)', async () => {
    const document = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    const files = await generate(document);
    expect(Object.keys(files).sort()).toEqual(['bindings.ts', 'openapi.ts', 'operations.ts']);
    for (const [file, text] of Object.entries(files))
      expect(text === readFileSync(join(GENERATED, file), 'utf8'), `sdk/src/generated/${file} is stale`).toBe(
        true,
      );
  });
});
