import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { loadProfileEnv } from './env-file.js';
import { run } from './exec.js';
import { installServers, TOOL_PACKAGES, TOOL_PYTHON_ENVS } from './install.js';
import { selectServers } from './servers/index.js';
import { createContext, down, up } from './stack.js';

export interface TestSummary {
  passed: number;
  failed: number;
  skipped: number;
}

/** Counts from vitest's JSON report (Jest's format); pending and todo tests count as skipped. */
export function summarizeVitestReport(report: unknown): TestSummary {
  const counts = (report ?? {}) as Partial<
    Record<'numPassedTests' | 'numFailedTests' | 'numPendingTests' | 'numTodoTests', number>
  >;
  return {
    passed: counts.numPassedTests ?? 0,
    failed: counts.numFailedTests ?? 0,
    skipped: (counts.numPendingTests ?? 0) + (counts.numTodoTests ?? 0),
  };
}

export function formatTestSummary({ passed, failed, skipped }: TestSummary): string {
  return `tests: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`;
}

/**
 * `npm test`: the test profile's servers and control plane (reusing running ones), then typecheck, lint and
 * vitest against them; stops only what it started, and ends with one summary line.
 */
export async function testCommand(): Promise<number> {
  const context = createContext('test');
  const servers = selectServers('test', undefined);
  await installServers(servers, context.paths.binDir, {
    packages: TOOL_PACKAGES,
    pythonEnvs: TOOL_PYTHON_ENVS,
  });
  const reportFile = join(context.paths.profileDir, 'vitest.json');
  const steps: [name: string, command: string, args: string[]][] = [
    ['typecheck', 'npm', ['run', 'typecheck']],
    ['lint', 'npx', ['biome', 'check', '.']],
    [
      'vitest',
      'npx',
      [
        'vitest',
        'run',
        '--reporter=default',
        '--reporter=json',
        `--outputFile=${relative(context.paths.root, reportFile)}`,
      ],
    ],
  ];
  // Ctrl-C reaches the running step too; the runner itself lets it end, skips the rest and cleans up.
  let interrupted = false;
  const onInterrupt = () => {
    interrupted = true;
  };
  process.on('SIGINT', onInterrupt);
  const failedSteps: string[] = [];
  const { started, failures } = await up(context, servers);
  try {
    for (const failure of failures) console.error(failure.message);
    if (failures.length > 0) failedSteps.push('stack up');
    else {
      // A stale report from an earlier run must never be counted as this run's.
      rmSync(reportFile, { force: true });
      const env = { ...process.env, ...loadProfileEnv('test', context.paths.root) };
      for (const [name, command, args] of steps) {
        if (interrupted) break;
        console.log(`\n> ${[command, ...args].join(' ')}`);
        const result = await run(command, args, { cwd: context.paths.root, env, inherit: true });
        if (result.code !== 0) failedSteps.push(name);
      }
      if (interrupted) failedSteps.push('interrupted');
    }
  } finally {
    await down(
      context,
      servers.filter((server) => started.includes(server.name)),
    );
    process.off('SIGINT', onInterrupt);
  }
  const summary = existsSync(reportFile)
    ? summarizeVitestReport(JSON.parse(readFileSync(reportFile, 'utf8')))
    : { passed: 0, failed: 0, skipped: 0 };
  if (failedSteps.length > 0) console.log(`\nfailed: ${failedSteps.join(', ')}`);
  console.log(formatTestSummary(summary));
  return failedSteps.length > 0 ? 1 : 0;
}
