import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { StackError } from '../errors.js';
import { runChecked } from '../exec.js';
import { pgBinDir } from '../servers/postgres.js';
import { serverEnv } from '../supervisor.js';

/** Row counts per table of schema public, read in one snapshot. */
export type TableRows = Record<string, number>;

/**
 * libpq's settings for the control plane's own role, from its SVC_DATABASE_URL: the tools then need
 * no connection arguments, and the password never shows on a command line.
 */
export function libpqEnv(databaseUrl: string): NodeJS.ProcessEnv {
  const url = new URL(databaseUrl);
  return serverEnv({
    PGHOST: url.hostname,
    PGPORT: url.port || '5432',
    PGUSER: decodeURIComponent(url.username),
    PGPASSWORD: decodeURIComponent(url.password),
    PGDATABASE: decodeURIComponent(url.pathname.slice(1)),
    PGAPPNAME: 'svc-backup',
    PGCONNECT_TIMEOUT: '10',
  });
}

/** Printed after each statement's rows, so that a reader knows where one result ends. */
const END_OF_RESULT = '--svc-end-of-result--';

/**
 * One psql process fed a statement at a time: its statements share one session, so a transaction and
 * the snapshot it exports outlive a statement (pg_dump runs inside it meanwhile).
 */
class PsqlSession {
  private readonly lines: AsyncIterator<string>;
  private readonly closed: Promise<unknown>;
  private stderr = '';

  constructor(private readonly child: ChildProcessByStdio<Writable, Readable, Readable>) {
    this.lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    child.stdin.on('error', () => {});
    this.closed = new Promise((resolve) => {
      child.once('close', resolve);
      // psql could not start: its statements fail with this.
      child.once('error', (error) => {
        this.stderr += error.message;
        resolve(undefined);
      });
    });
  }

  static open(env: NodeJS.ProcessEnv): PsqlSession {
    // Unaligned, tuples only, tab-separated; any error ends psql, and with it the transaction.
    const args = ['-X', '-q', '-A', '-t', '-F', '\t', '-v', 'ON_ERROR_STOP=1'];
    return new PsqlSession(spawn(join(pgBinDir(), 'psql'), args, { env, stdio: ['pipe', 'pipe', 'pipe'] }));
  }

  /** Runs one statement; its rows, each a list of fields. */
  async query(statement: string): Promise<string[][]> {
    this.child.stdin.write(`${statement};\n\\echo ${END_OF_RESULT}\n`);
    const rows: string[][] = [];
    for (;;) {
      const line = await this.lines.next();
      if (line.done) {
        await this.closed;
        throw new StackError(`psql failed: ${this.stderr.trim() || `exit ${this.child.exitCode}`}`);
      }
      if (line.value === END_OF_RESULT) return rows;
      rows.push(line.value.split('\t'));
    }
  }

  /**
   * Runs a script read from a stream (pg_restore's output) in the session, dropping what it prints;
   * a failing statement ends psql, and this with its error.
   */
  async feed(script: Readable): Promise<void> {
    script.pipe(this.child.stdin, { end: false });
    await Promise.race([finished(script), this.closed]);
    await this.query('select 1');
  }

  async close(): Promise<void> {
    this.child.stdin.end();
    await this.closed;
  }
}

/** Runs statements in one session and closes it, whatever happens. */
async function withSession<T>(env: NodeJS.ProcessEnv, use: (session: PsqlSession) => Promise<T>): Promise<T> {
  const session = PsqlSession.open(env);
  try {
    return await use(session);
  } finally {
    await session.close();
  }
}

/** The row count of every table of schema public; query_to_xml counts a table a catalogue row names. */
async function tableRows(session: PsqlSession): Promise<TableRows> {
  const rows = await session.query(`
    select c.relname,
      (xpath('/row/n/text()', query_to_xml(
        format('select count(*) as n from public.%I', c.relname), false, true, '')))[1]::text
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind = 'r' and n.nspname = 'public'
    order by 1`);
  return Object.fromEntries(rows.map(([table, count]) => [table, Number(count)]));
}

export interface DatabaseDump {
  /** When the snapshot was taken (UTC, ISO 8601): the dump holds what was committed before it. */
  snapshotAt: string;
  /** The last migration applied, from schema_migrations. */
  migration: string;
  rows: TableRows;
  serverVersion: string;
}

/**
 * pg_dump (custom format) of schema public, the control plane's, into `file`, in a snapshot exported by
 * a transaction held open meanwhile, so that the row counts and migration level recorded beside it are
 * the dump's own. Its extensions (pg_trgm…) go with it; other schemas (a test's scratch schema) do not.
 */
export async function dumpDatabase(env: NodeJS.ProcessEnv, file: string): Promise<DatabaseDump> {
  return withSession(env, async (session) => {
    await session.query('begin isolation level repeatable read, read only');
    const [[snapshot = '', snapshotAt = '', serverVersion = ''] = []] = await session.query(
      `select pg_export_snapshot(),
        to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), current_setting('server_version')`,
    );
    await runChecked(
      'pg_dump',
      join(pgBinDir(), 'pg_dump'),
      [
        '--format=custom',
        '--schema=public',
        '--extension=*',
        `--snapshot=${snapshot}`,
        `--file=${file}`,
        '--no-password',
      ],
      { env },
    );
    chmodSync(file, 0o600);
    const [[migration = ''] = []] = await session.query('select max(version) from schema_migrations');
    const rows = await tableRows(session);
    await session.query('commit');
    return { snapshotAt, migration, rows, serverVersion };
  });
}

/** How many accounts the database holds: none (or no table yet) is an empty stack. */
export async function accountCount(env: NodeJS.ProcessEnv): Promise<number> {
  return withSession(env, async (session) => {
    const [[exists] = []] = await session.query(`select to_regclass('public.accounts') is not null`);
    if (exists !== 't') return 0;
    const [[count = '0'] = []] = await session.query('select count(*) from public.accounts');
    return Number(count);
  });
}

/** "accounts: 3 rows, the backup 4" for every table of the backup whose count differs. */
function rowDifferences(actual: TableRows, expected: TableRows): string[] {
  return Object.entries(expected)
    .filter(([table, rows]) => actual[table] !== rows)
    .map(([table, rows]) => `${table}: ${actual[table] ?? 'no table'} rows, the backup ${rows}`);
}

/**
 * Replaces schema public with the dump's in one transaction, committed only once every table holds the
 * rows the backup counted: a failure at any step leaves the database as it was. Dropping the schema
 * first (rather than pg_restore --clean) also removes what the dump does not know, such as the tables
 * of a newer release's migrations, which would otherwise stay while schema_migrations forgets them;
 * the dump creates the schema again. Owners and grants are not restored: the connecting role (the
 * control plane's) owns everything, as it does after its own migrations.
 */
export async function replaceDatabase(
  env: NodeJS.ProcessEnv,
  file: string,
  expectedRows: TableRows,
): Promise<TableRows> {
  return withSession(env, async (session) => {
    await session.query('begin');
    await session.query('drop schema if exists public cascade');
    const script = spawn(
      join(pgBinDir(), 'pg_restore'),
      ['--no-owner', '--no-privileges', '--file=-', file],
      {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let scriptErrors = '';
    script.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      scriptErrors += chunk;
    });
    const closed = once(script, 'close');
    try {
      await session.feed(script.stdout);
    } finally {
      // Blocked on a full pipe once psql stopped reading.
      if (script.exitCode === null && script.signalCode === null) script.kill();
    }
    const [exitCode] = (await closed) as [number | null];
    if (exitCode !== 0)
      throw new StackError(`pg_restore failed (exit ${exitCode}); nothing changed:\n${scriptErrors.trim()}`);
    const rows = await tableRows(session);
    const differences = rowDifferences(rows, expectedRows);
    if (differences.length > 0)
      throw new StackError(
        `the restored tables do not match the backup; nothing changed:\n${differences.join('\n')}`,
      );
    await session.query('commit');
    return rows;
  });
}
