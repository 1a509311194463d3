import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DatabasePool, sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runMigrations } from '../src/db/migrate.js';
import { createDatabasePool, withSessionSetting } from '../src/db/pool.js';
import { randomBase62 } from '../src/platform/ids.js';
import { testSettings } from './support.js';

let admin: DatabasePool;
let pool: DatabasePool;
const schema = `migrate_${randomBase62(8).toLowerCase()}`;

beforeAll(async () => {
  // Each run migrates a scratch schema of its own, leaving the shared test schema alone.
  const url = testSettings().SVC_DATABASE_URL;
  admin = await createDatabasePool(url);
  await admin.query(sql.unsafe`create schema ${sql.identifier([schema])}`);
  pool = await createDatabasePool(withSessionSetting(url, 'search_path', schema));
});
afterAll(async () => {
  await pool.end();
  await admin.query(sql.unsafe`drop schema ${sql.identifier([schema])} cascade`);
  await admin.end();
});

async function migrationsDir(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'migrations-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

describe('runMigrations', () => {
  it('applies the shipped migrations once and then nothing', async () => {
    const first = await runMigrations(pool);
    expect(first[0]).toBe('0001_accounts');
    expect(await runMigrations(pool)).toEqual([]);
    const tables = await pool.anyFirst(
      sql.type(z.object({ table_name: z.string() }))`
        select table_name from information_schema.tables where table_schema = ${schema} order by table_name`,
    );
    expect(tables).toEqual(
      expect.arrayContaining(['accounts', 'api_keys', 'apps', 'ledger_entries', 'schema_migrations']),
    );
  });

  it("leaves the control plane's sessions without JIT and parallel workers, costing pages as in memory", async () => {
    // A session opened after the migrations ran (the scratch pool's first came before this file's).
    const fresh = await createDatabasePool(testSettings().SVC_DATABASE_URL);
    try {
      const settings = await fresh.one(
        sql.type(z.object({ jit: z.string(), workers: z.string(), randomPage: z.string() }))`
          select current_setting('jit') as jit, current_setting('max_parallel_workers_per_gather') as workers,
                 current_setting('random_page_cost') as "randomPage"`,
      );
      expect(settings).toEqual({ jit: 'off', workers: '0', randomPage: '1.1' });
    } finally {
      await fresh.end();
    }
  });

  it('runs a failing migration not at all, and refuses an applied one that was edited', async () => {
    const dir = await migrationsDir({
      '0001_one.sql': 'create table one (x int);',
      '0002_two.sql': 'create table two (x int); insert into missing values (1);',
    });
    await expect(runMigrations(pool, dir)).rejects.toThrow(/missing/);
    const two = await pool.maybeOneFirst(
      sql.type(
        z.object({ exists: z.boolean() }),
      )`select to_regclass(${`${schema}.two`}) is not null as exists`,
    );
    expect(two).toBe(false);

    await writeFile(join(dir, '0002_two.sql'), 'create table two (x int);');
    expect(await runMigrations(pool, dir)).toEqual(['0002_two']);
    await writeFile(join(dir, '0001_one.sql'), 'create table one (x bigint);');
    await expect(runMigrations(pool, dir)).rejects.toThrow(/0001_one was changed after it was applied/);
  });
});
