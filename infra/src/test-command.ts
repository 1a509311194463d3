import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { loadProfileEnv } from './env-file.js';
import { run } from './exec.js';
import { installServers, TOOL_PACKAGES, TOOL_PYTHON_ENVS } from './install.js';
import { stackPaths } from './paths.js';
import type { Profile } from './profile.js';
import { selectServers } from './servers/index.js';
import type { StackContext } from './servers/types.js';
import { createContext, down, unitsOf, up } from './stack.js';

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

export interface FailedTest {
  file: string;
  name: string;
  durationMs: number;
  /** The failure's first lines, without colour codes. */
  message: string;
}

const MESSAGE_LINES = 6;

/**
 * Every failed test of a vitest JSON report with the head of its failure: the run's last lines are
 * all a CI log may keep, so they name what failed and why.
 */
export function failedTestsOf(report: unknown, root: string): FailedTest[] {
  const files = ((report ?? {}) as { testResults?: unknown[] }).testResults ?? [];
  return files.flatMap((file) => {
    const { name: path = '', assertionResults = [] } = file as {
      name?: string;
      assertionResults?: {
        status?: string;
        fullName?: string;
        duration?: number;
        failureMessages?: string[];
      }[];
    };
    return assertionResults
      .filter((test) => test.status === 'failed')
      .map((test) => ({
        file: relative(root, path),
        name: test.fullName ?? '',
        durationMs: Math.round(test.duration ?? 0),
        message: stripVTControlCharacters(test.failureMessages?.[0] ?? '')
          .split('\n')
          .slice(0, MESSAGE_LINES)
          .join('\n'),
      }));
  });
}

export function formatFailedTests(tests: readonly FailedTest[]): string {
  return (
    tests
      // The duration tells a timeout, whose message in the report is only vitest's own stack.
      .map(
        ({ file, name, durationMs, message }) =>
          `  ${file} > ${name} (${durationMs} ms)\n${message.replace(/^/gm, '      ')}`,
      )
      .join('\n')
  );
}

export function formatTestSummary({ passed, failed, skipped }: TestSummary): string {
  return `tests: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`;
}

type Step = [name: string, command: string, args: string[]];

/** Runs vitest with a JSON report in the profile's dir, whose counts the summary adds up. */
function vitestStep(name: string, reportFile: string, root: string, projects: readonly string[] = []): Step {
  return [
    name,
    'npx',
    [
      'vitest',
      'run',
      ...projects.flatMap((project) => ['--project', project]),
      '--reporter=default',
      '--reporter=json',
      `--outputFile=${relative(root, reportFile)}`,
    ],
  ];
}

/** One profile's stack, and the steps that run against it. */
interface Stage {
  profile: Profile;
  steps: (reportFile: string, root: string) => Step[];
}

/**
 * Everything but the scale profile's tests runs against the test stack; then the scale stack runs the
 * end-to-end suite again, through its proxy, and the cluster's own tests (node loss).
 */
const STAGES: readonly Stage[] = [
  {
    profile: 'test',
    steps: (reportFile, root) => [
      ['typecheck', 'npm', ['run', 'typecheck']],
      ['lint', 'npx', ['biome', 'check', '.']],
      vitestStep('vitest', reportFile, root),
    ],
  },
  {
    profile: 'scale',
    steps: (reportFile, root) => [
      vitestStep('vitest on the scale stack', reportFile, root, ['e2e', 'scale']),
    ],
  },
];

/**
 * `npm test`: each stage's servers (reusing running ones), its steps against them, then a stop of only
 * what it started; ends with one summary line over every stage's report.
 */
export async function testCommand(): Promise<number> {
  const contexts = STAGES.map((stage) => createContext(stage.profile));
  const servers = new Set(STAGES.flatMap((stage) => selectServers(stage.profile, undefined)));
  await installServers([...servers], stackPaths('test').binDir, {
    packages: TOOL_PACKAGES,
    pythonEnvs: TOOL_PYTHON_ENVS,
  });
  // Ctrl-C reaches the running step too; the runner itself lets it end, skips the rest and cleans up.
  let interrupted = false;
  const onInterrupt = () => {
    interrupted = true;
  };
  process.on('SIGINT', onInterrupt);
  const failedSteps: string[] = [];
  const summary: TestSummary = { passed: 0, failed: 0, skipped: 0 };
  const failedTests: FailedTest[] = [];
  try {
    for (const [index, stage] of STAGES.entries()) {
      if (interrupted) break;
      const context = contexts[index] as StackContext;
      const reportFile = join(context.paths.profileDir, 'vitest.json');
      // A stale report from an earlier run must never be counted as this run's.
      rmSync(reportFile, { force: true });
      await runStage(context, stage.steps(reportFile, context.paths.root), failedSteps, () => interrupted);
      if (existsSync(reportFile)) {
        const report: unknown = JSON.parse(readFileSync(reportFile, 'utf8'));
        const counts = summarizeVitestReport(report);
        failedTests.push(...failedTestsOf(report, context.paths.root));
        summary.passed += counts.passed;
        summary.failed += counts.failed;
        summary.skipped += counts.skipped;
      }
    }
    if (interrupted) failedSteps.push('interrupted');
  } finally {
    process.off('SIGINT', onInterrupt);
  }
  if (failedSteps.length > 0) console.log(`\nfailed: ${failedSteps.join(', ')}`);
  if (failedTests.length > 0) console.log(`failed tests:\n${formatFailedTests(failedTests)}`);
  console.log(formatTestSummary(summary));
  return failedSteps.length > 0 ? 1 : 0;
}

/** Brings the profile's stack up, runs the steps with its settings, and stops what it started. */
async function runStage(
  context: StackContext,
  steps: readonly Step[],
  failedSteps: string[],
  interrupted: () => boolean,
): Promise<void> {
  const servers = selectServers(context.profile, undefined);
  const { started, failures } = await up(context, servers);
  try {
    for (const failure of failures) console.error(failure.message);
    if (failures.length > 0) {
      failedSteps.push(`${context.profile} stack up`);
      return;
    }
    const env = {
      ...process.env,
      ...loadProfileEnv(context.profile, context.paths.root),
      SVC_STACK_PROFILE: context.profile,
    };
    for (const [name, command, args] of steps) {
      if (interrupted()) break;
      console.log(`\n> ${[command, ...args].join(' ')}`);
      const result = await run(command, args, { cwd: context.paths.root, env, inherit: true });
      if (result.code !== 0) failedSteps.push(name);
    }
  } finally {
    await down(
      context,
      unitsOf(context, servers).filter((unit) => started.includes(unit.name)),
    );
  }
}
