/**
 * Regenerates sdk/src/generated from the control plane's OpenAPI document: from the URL given, or
 * from the test stack's running control plane (`npm run stack -- up --profile test`).
 *
 *   npm run generate -w sdk [-- http://127.0.0.1:28000/v1/openapi.json]
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generate } from './generator.js';

const GENERATED = join(import.meta.dirname, '..', 'src', 'generated');

const url = process.argv[2] ?? 'http://127.0.0.1:28000/v1/openapi.json';
const response = await fetch(url);
if (!response.ok) throw new Error(`${url} answered ${response.status}`);
for (const [file, text] of Object.entries(await generate(await response.json()))) {
  writeFileSync(join(GENERATED, file), text);
  console.log(`wrote sdk/src/generated/${file}`);
}
