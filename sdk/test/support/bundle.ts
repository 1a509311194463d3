import { build } from 'esbuild';

/**
 * An app's browser bundle of `entry` (ES module), as its bundler would ship it, with xmpp.js and
 * livekit-client inside, resolved from `resolveDir`'s node_modules.
 */
export async function browserBundle(entry: { contents: string; resolveDir: string }): Promise<string> {
  const bundle = await build({
    stdin: { ...entry, loader: 'ts' },
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    logLevel: 'silent',
    // xmpp.js 0.14's browser field misses @xmpp/resolve's `node:dns` (used only without a service URL).
    plugins: [
      {
        name: 'node-builtins-absent',
        setup(plugin) {
          plugin.onResolve({ filter: /^node:/ }, ({ path }) => ({ path, namespace: 'absent' }));
          plugin.onLoad({ filter: /.*/, namespace: 'absent' }, () => ({ contents: 'export default {};' }));
        },
      },
    ],
  });
  return bundle.outputFiles[0]!.text;
}
