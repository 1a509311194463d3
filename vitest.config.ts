import { existsSync, readFileSync } from 'node:fs';
import { defineConfig } from 'vitest/config';

/**
 * The stack the tests drive: the test profile's, or the scale profile's with SVC_STACK_PROFILE=scale
 * (then only the `e2e` and `scale` projects apply).
 */
const profile = process.env.SVC_STACK_PROFILE === 'scale' ? 'scale' : 'test';

/**
 * The stack's settings. `npm test` passes them in the environment; a developer running vitest
 * directly after `npm run stack -- up --profile test` gets them from the stack's env file.
 */
function testStackEnv(): Record<string, string> {
  const file = `.stack/${profile}/control-plane.env`;
  if (process.env.SVC_DATABASE_URL || !existsSync(file)) return {};
  return Object.fromEntries(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => /^[A-Z0-9_]+=/.test(line))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

const env = testStackEnv();
// globalSetup runs in this process, not in the workers that receive `test.env`.
Object.assign(process.env, env);
// The AWS SDK warns every test process that its releases after January 2027 need Node 22; the
// lockfile pins this one, and the warning buried CI's output. The control plane still logs it once.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export default defineConfig({
  test: {
    env,
    projects: [
      {
        test: {
          name: 'unit',
          include: [
            'control-plane/src/**/*.test.ts',
            'infra/test/**/*.test.ts',
            'ejabberd/test/**/*.test.ts',
          ],
          env,
          // Past vitest's 5 s: these run beside the integration suite, and some spend seconds of CPU
          // by design (scrypt hashes, docker-compose renders) that a loaded CI machine stretches.
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['control-plane/test/**/*.test.ts'],
          exclude: ['control-plane/test/restarts/**'],
          globalSetup: ['control-plane/test/global-setup.ts'],
          env,
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['e2e/**/*.test.ts'],
          exclude: ['e2e/contract-fuzz.test.ts', 'e2e/scale/**'],
          env,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        // The SDK against the running stack, and its generated code against the API it describes.
        test: {
          name: 'sdk',
          include: ['sdk/test/**/*.test.ts'],
          env,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        // Calls every operation thousands of times, the AI provider's among them: alone, so that no
        // other test's limits (the provider's queue, per-user rates) meet its traffic.
        test: {
          name: 'contract',
          include: ['e2e/contract-fuzz.test.ts'],
          sequence: { groupOrder: 1 },
          env,
          testTimeout: 900_000,
          hookTimeout: 60_000,
        },
      },
      {
        // Stops and starts the test stack's servers: only after every other project has finished, and
        // one file at a time (each file's restarts would break the other's).
        test: {
          name: 'restarts',
          include: ['control-plane/test/restarts/**/*.test.ts'],
          fileParallelism: false,
          globalSetup: ['control-plane/test/global-setup.ts'],
          sequence: { groupOrder: 2 },
          env,
          testTimeout: 180_000,
          hookTimeout: 30_000,
        },
      },
      ...(profile === 'scale'
        ? [
            {
              // The scale profile's own tests: the cluster's nodes meet, and survive losing one each.
              test: {
                name: 'scale',
                include: ['e2e/scale/**/*.test.ts'],
                // After the e2e suite (they kill nodes), one file at a time.
                sequence: { groupOrder: 1 },
                fileParallelism: false,
                env,
                testTimeout: 600_000,
                hookTimeout: 60_000,
              },
            },
          ]
        : []),
    ],
  },
});
