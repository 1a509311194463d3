// Bundles the dashboard's browser assets: dashboard-client/main.ts, with the stylesheets it imports, into
// dist/dashboard-assets/app.js and app.css, which the control plane serves under /dashboard/assets/.
// Run by `npm run build -w control-plane`; paths are relative to this file, so any cwd works.
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { basename, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const packageDir = fileURLToPath(new URL('..', import.meta.url));
const entry = fileURLToPath(new URL('../dashboard-client/main.ts', import.meta.url));
const outdir = fileURLToPath(new URL('../dist/dashboard-assets/', import.meta.url));
const EXPECTED = ['app.js', 'app.css'];

// uPlot's own licence comment is not a /*! comment, so minifying would drop it.
const banner =
  '/*! svc dashboard. Includes uPlot (https://github.com/leeoniya/uPlot), MIT licence, (c) Leon Sorokin */';

rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });

const result = await build({
  absWorkingDir: packageDir,
  // The entry's name becomes the outputs' names: app.js, and app.css for the CSS it imports.
  entryPoints: { app: entry },
  outdir,
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  platform: 'browser',
  banner: { js: banner, css: banner },
  metafile: true,
  logLevel: 'warning',
});

const outputs = Object.keys(result.metafile.outputs).map((file) => basename(file));
const unexpected = outputs.filter((name) => !EXPECTED.includes(name));
const missing = EXPECTED.filter((name) => !outputs.includes(name));
if (unexpected.length > 0 || missing.length > 0) {
  console.error(
    `dashboard assets: expected exactly ${EXPECTED.join(' and ')} in ${relative(process.cwd(), outdir)}` +
      `${missing.length ? `; missing ${missing.join(', ')}` : ''}` +
      `${unexpected.length ? `; unexpected ${unexpected.join(', ')}` : ''}`,
  );
  process.exit(1);
}

const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;
const sizes = EXPECTED.map((name) => {
  const content = readFileSync(new URL(name, new URL('../dist/dashboard-assets/', import.meta.url)));
  return `${name} ${kib(content.length)} (${kib(gzipSync(content).length)} gzipped)`;
});
console.log(`dashboard assets: ${sizes.join(', ')}`);
