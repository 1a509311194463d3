import { describe, expect, it } from 'vitest';
import { extractProfileOption } from '../src/admin.js';
import { selectServers } from '../src/servers/index.js';
import {
  failedTestsOf,
  formatFailedTests,
  formatTestSummary,
  summarizeVitestReport,
} from '../src/test-command.js';

const names = (servers: readonly { name: string }[]) => servers.map((server) => server.name);

describe('server selection', () => {
  it('starts every server, the control plane last, in both profiles', () => {
    const all = ['postgres', 'redis', 'ejabberd', 'livekit', 'minio', 'ai', 'control-plane'];
    expect(names(selectServers('dev', undefined))).toEqual(all);
    // ejabberd asks the test profile's control plane about every e2e login.
    expect(names(selectServers('test', undefined))).toEqual(all);
  });

  it('takes --only in start order and refuses unknown names', () => {
    expect(names(selectServers('test', 'minio, postgres'))).toEqual(['postgres', 'minio']);
    expect(() => selectServers('dev', 'postgres,mysql')).toThrow(/--only takes/);
  });
});

describe('admin wrapper', () => {
  it('takes --profile out of the admin CLI arguments wherever it stands', () => {
    expect(extractProfileOption(['account', 'list', '--profile', 'test'])).toEqual({
      profile: 'test',
      rest: ['account', 'list'],
    });
    expect(extractProfileOption(['--profile=test', 'key', 'list', '--app', 'a'])).toEqual({
      profile: 'test',
      rest: ['key', 'list', '--app', 'a'],
    });
    expect(extractProfileOption(['account', 'list'])).toEqual({
      profile: undefined,
      rest: ['account', 'list'],
    });
  });
});

describe('test summary', () => {
  it('counts from the vitest JSON report, with skipped only when there are any', () => {
    const report = { numPassedTests: 41, numFailedTests: 2, numPendingTests: 1, numTodoTests: 1 };
    expect(formatTestSummary(summarizeVitestReport(report))).toBe('tests: 41 passed, 2 failed, 2 skipped');
    expect(formatTestSummary(summarizeVitestReport({ numPassedTests: 3, numFailedTests: 0 }))).toBe(
      'tests: 3 passed, 0 failed',
    );
  });

  it('names each failed test with the head of its failure, relative to the root and without colours', () => {
    const report = {
      testResults: [
        {
          name: '/repo/e2e/chat.test.ts',
          assertionResults: [
            { status: 'passed', fullName: 'chat logs in', failureMessages: [] },
            {
              status: 'failed',
              fullName: 'chat refuses an empty balance',
              duration: 30_009.8,
              failureMessages: [
                '\u001b[31mAssertionError: expected 200 to be 402\u001b[39m\n    at a\n    at b\n    at c\n    at d\n    at e\n    at f',
              ],
            },
          ],
        },
      ],
    };
    const failed = failedTestsOf(report, '/repo');
    expect(failed).toEqual([
      {
        file: 'e2e/chat.test.ts',
        name: 'chat refuses an empty balance',
        durationMs: 30_010,
        message: 'AssertionError: expected 200 to be 402\n    at a\n    at b\n    at c\n    at d\n    at e',
      },
    ]);
    expect(formatFailedTests(failed).split('\n')[0]).toBe(
      '  e2e/chat.test.ts > chat refuses an empty balance (30010 ms)',
    );
    expect(failedTestsOf({ numFailedTests: 0 }, '/repo')).toEqual([]);
  });
});
