import { existsSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { adminCommand } from './admin.js';
import { backupCommand, restoreCommand } from './backup/commands.js';
import { ensureDevKey, renderBanner } from './banner.js';
import { StackError, UsageError } from './errors.js';
import { installServers, TOOL_PACKAGES, TOOL_PYTHON_ENVS } from './install.js';
import { followLogs, tailLines } from './logs.js';
import { stackPaths } from './paths.js';
import { parseProfile } from './profile.js';
import { readRunRecord } from './run-records.js';
import { SERVERS, selectServers } from './servers/index.js';
import type { ServerDefinition, StackContext } from './servers/types.js';
import { createContext, down, formatStatus, logFileOf, status, type Unit, unitsOf, up } from './stack.js';
import { testCommand } from './test-command.js';

const USAGE = `usage: npm run stack -- <command> [--profile dev|test|scale] [--only server,...]

commands:
  up                  install what is missing, start the servers and wait until they are healthy
  status              each server's pid, whether it is alive and healthy, and its URL
  logs [server] [-f]  the last lines of the servers' logs; -f keeps following them
  down                stop the servers this runner started
  test                npm test: test stack up, typecheck, lint, vitest, then stop what it started
  install             install the Debian packages and build LiveKit and MinIO

The profile is dev unless --profile says otherwise; scale runs two instances each of the control plane,
ejabberd and LiveKit behind a proxy (docs/scaling.md). Servers: ${SERVERS.map((server) => server.name).join(', ')}.
npm run admin -- [--profile test] <command> runs the control plane's admin CLI against a profile.
npm run backup -- [--profile test] [--to DIR] and npm run restore -- --from DIR [--profile test] [--force]
back up a profile's stack and restore one (docs/operations.md).`;

const LOG_TAIL_LINES = 50;

const OPTIONS = {
  profile: { type: 'string' },
  only: { type: 'string' },
  follow: { type: 'boolean', short: 'f' },
  help: { type: 'boolean', short: 'h' },
} as const;

function parseCommandLine(args: readonly string[]) {
  try {
    return parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n\n${USAGE}`);
  }
}

/** The units a command reports on: the selection's, plus any other one that has a run record. */
function withRecorded(context: StackContext, selected: readonly ServerDefinition[]): Unit[] {
  return unitsOf(context, SERVERS).filter(
    (unit) => selected.includes(unit.server) || readRunRecord(context.paths.runDir, unit.name) !== undefined,
  );
}

async function upCommand(context: StackContext, servers: readonly ServerDefinition[]): Promise<number> {
  const startedAt = Date.now();
  await installServers(servers, context.paths.binDir);
  const { failures } = await up(context, servers);
  if (failures.length > 0) {
    for (const failure of failures) console.error(`\n${failure.message}`);
    return 1;
  }
  console.log(`${context.profile} stack up in ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
  if (servers.some((server) => server.name === 'control-plane'))
    console.log(renderBanner(context, await ensureDevKey(context)));
  else console.log(`\n${formatStatus(await status(unitsOf(context, servers)))}`);
  return 0;
}

async function logsCommand(context: StackContext, units: readonly Unit[], follow: boolean) {
  const sources = units
    .map((unit) => ({ label: unit.name, file: logFileOf(context, unit.name) }))
    .filter((source) => existsSync(source.file));
  if (sources.length === 0)
    throw new StackError(
      `no log files yet in ${context.paths.logsDir} (profile ${context.profile}; --profile selects another)`,
    );
  for (const { file } of sources)
    console.log(`==> ${file} <==\n${tailLines(file, LOG_TAIL_LINES).join('\n')}\n`);
  if (follow) await followLogs(sources, (line) => console.log(line));
}

async function main(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  // The admin CLI has options of its own; they pass through untouched.
  if (command === 'admin') return adminCommand(rest);
  if (command === 'backup') return backupCommand(rest);
  if (command === 'restore') return restoreCommand(rest);
  const { values, positionals } = parseCommandLine(rest);
  if (command === undefined || values.help) {
    console.log(USAGE);
    return command === undefined && !values.help ? 2 : 0;
  }
  const profile = parseProfile(values.profile);
  if (command === 'test') {
    if ((values.profile !== undefined && profile !== 'test') || values.only !== undefined)
      throw new UsageError('test always uses the test profile and its default servers');
    return testCommand();
  }
  if (command === 'install') {
    await installServers(SERVERS, stackPaths(profile).binDir, {
      packages: TOOL_PACKAGES,
      pythonEnvs: TOOL_PYTHON_ENVS,
    });
    return 0;
  }
  const context = createContext(profile);
  const selected = selectServers(profile, values.only);
  switch (command) {
    case 'up':
      return upCommand(context, selected);
    case 'status': {
      const rows = await status(withRecorded(context, selected));
      console.log(formatStatus(rows));
      return rows.every((row) => row.healthy) ? 0 : 1;
    }
    case 'logs': {
      // "logs ejabberd" shows that one server; plain "logs" every server of the profile.
      const units =
        positionals[0] === undefined
          ? withRecorded(context, selected)
          : unitsOf(context, selectServers(profile, positionals[0]));
      await logsCommand(context, units, values.follow === true);
      return 0;
    }
    case 'down':
      await down(context, unitsOf(context, values.only === undefined ? SERVERS : selected));
      return 0;
    default:
      throw new UsageError(`unknown command "${command}"\n\n${USAGE}`);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof StackError) {
      console.error(`stack: ${error.message}`);
      process.exit(error instanceof UsageError ? 2 : 1);
    }
    console.error(error);
    process.exit(1);
  },
);
