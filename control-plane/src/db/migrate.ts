import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type DatabasePool, sql } from 'slonik';
import { z } from 'zod';
import { splitStatements } from './split-statements.js';
import { openTransaction } from './transaction.js';

export const MIGRATIONS_DIR = new URL('../../migrations/', import.meta.url).pathname;

interface Migration {
  version: string;
  sql: string;
  checksum: string;
}

async function readMigrations(dir: string): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((name) => /^\d{4}_[a-z0-9_]+\.sql$/.test(name)).sort();
  return Promise.all(
    files.map(async (name) => {
      const text = await readFile(join(dir, name), 'utf8');
      return {
        version: name.replace(/\.sql$/, ''),
        sql: text,
        checksum: createHash('sha256').update(text).digest('hex'),
      };
    }),
  );
}

/**
 * A migration statement is static SQL shipped with the code, so it goes to slonik as a template with no
 * interpolations (slonik accepts only real template arrays: frozen, with a frozen `raw`).
 */
function asTemplate(text: string): TemplateStringsArray {
  return Object.freeze(Object.assign([text], { raw: Object.freeze([text]) }));
}

/** Arbitrary but fixed: replicas starting together take turns through this advisory lock. */
const MIGRATION_LOCK_ID = 7_310_101;

/**
 * Applies the forward-only migrations that have not run yet, each in its own transaction, under an
 * advisory lock so that replicas starting at once never race. An applied migration whose file has
 * changed since is an error: history is never rewritten.
 */
export async function runMigrations(pool: DatabasePool, dir = MIGRATIONS_DIR): Promise<string[]> {
  const migrations = await readMigrations(dir);
  return pool.connect(async (connection) => {
    await connection.query(sql.unsafe`select pg_advisory_lock(${MIGRATION_LOCK_ID})`);
    try {
      await connection.query(sql.unsafe`
        create table if not exists schema_migrations (
          version text primary key,
          checksum text not null,
          applied_at timestamptz not null default now()
        )`);
      const applied = await connection.any(
        sql.type(
          z.object({ version: z.string(), checksum: z.string() }),
        )`select version, checksum from schema_migrations`,
      );
      const checksums = new Map(applied.map((row) => [row.version, row.checksum]));
      const ran: string[] = [];
      for (const migration of migrations) {
        const known = checksums.get(migration.version);
        if (known !== undefined) {
          if (known !== migration.checksum) {
            throw new Error(
              `migration ${migration.version} was changed after it was applied; add a new migration instead`,
            );
          }
          continue;
        }
        const open = openTransaction(connection);
        try {
          // Not the API's statement timeout: rewriting a big table may take minutes, and cut short it
          // would stop every replica from starting.
          await open.db.query(sql.unsafe`set local statement_timeout = 0`);
          for (const statement of splitStatements(migration.sql))
            await open.db.query(sql.unsafe(asTemplate(statement)));
          await open.db.query(
            sql.unsafe`insert into schema_migrations (version, checksum) values (${migration.version}, ${migration.checksum})`,
          );
        } catch (error) {
          await open.rollback();
          throw error;
        }
        await open.commit();
        ran.push(migration.version);
      }
      return ran;
    } finally {
      await connection.query(sql.unsafe`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`);
    }
  });
}
