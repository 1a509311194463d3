import { copyFile, mkdtemp, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type DatabasePool, sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type Core, createCore } from '../src/core.js';
import { MIGRATIONS_DIR, runMigrations } from '../src/db/migrate.js';
import { createDatabasePool, withSessionSetting } from '../src/db/pool.js';
import { randomBase62 } from '../src/platform/ids.js';
import { inTransaction } from '../src/platform/transaction.js';
import { createCustomer, startTestApp, type TestContext, testSettings } from './support.js';

/**
 * The last migration of the previous release: an upgrade from its schema, holding real data, keeps
 * every row. Move it forward when a release ships.
 */
const PREVIOUS_RELEASE = '0020_circles';

let ctx: TestContext;
let admin: DatabasePool;
let scratch: DatabasePool;
let scratchUrl: string;
const schema = `upgrade_${randomBase62(8).toLowerCase()}`;

beforeAll(async () => {
  ctx = await startTestApp();
  const url = testSettings().SVC_DATABASE_URL;
  admin = await createDatabasePool(url);
  await admin.query(sql.unsafe`create schema ${sql.identifier([schema])}`);
  scratchUrl = withSessionSetting(url, 'search_path', schema);
  scratch = await createDatabasePool(scratchUrl);
});
afterAll(async () => {
  await scratch?.end();
  await admin?.query(sql.unsafe`drop schema ${sql.identifier([schema])} cascade`);
  await admin?.end();
  await ctx?.close();
});

/** The shipped migrations up to `last`, in a directory of their own. */
async function migrationsUpTo(last: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'release-'));
  for (const name of await readdir(MIGRATIONS_DIR))
    if (name.endsWith('.sql') && name.replace(/\.sql$/, '') <= last)
      await copyFile(join(MIGRATIONS_DIR, name), join(dir, name));
  return dir;
}

const Names = z.object({ name: z.string() });

/** The scratch schema's tables, parents before children (by their foreign keys). */
async function tablesInOrder(): Promise<string[]> {
  const tables = await scratch.anyFirst(
    sql.type(Names)`select table_name as name from information_schema.tables
      where table_schema = ${schema} and table_type = 'BASE TABLE' and table_name <> 'schema_migrations'`,
  );
  const edges = await scratch.any(
    sql.type(z.object({ child: z.string(), parent: z.string() }))`
      select c.relname as child, p.relname as parent from pg_constraint k
      join pg_class c on c.oid = k.conrelid join pg_class p on p.oid = k.confrelid
      join pg_namespace n on n.oid = c.relnamespace
      where k.contype = 'f' and n.nspname = ${schema} and c.relname <> p.relname`,
  );
  const ordered: string[] = [];
  const visit = (table: string, path: Set<string>) => {
    if (ordered.includes(table) || path.has(table)) return;
    for (const edge of edges) if (edge.child === table) visit(edge.parent, new Set([...path, table]));
    ordered.push(table);
  };
  for (const table of tables) visit(table, new Set());
  return ordered;
}

/** A table's columns; `written`: only those an insert may set (not generated ones). */
async function columnsOf(table: string, options: { written?: boolean } = {}): Promise<readonly string[]> {
  return scratch.anyFirst(
    sql.type(Names)`select column_name as name from information_schema.columns
      where table_schema = ${schema} and table_name = ${table}
        ${options.written ? sql.fragment`and is_generated = 'NEVER'` : sql.fragment``}
      order by ordinal_position`,
  );
}

/**
 * Columns a migration since the previous release moved to another table: each value must be there,
 * in `into.column` of the row whose `into.key` is the old row's `key`.
 */
const MOVED = [
  {
    table: 'webhook_deliveries',
    column: 'next_attempt_at',
    key: 'id',
    into: { table: 'webhook_due', column: 'due_at', key: 'delivery_id' },
  },
];

const movedFrom = (table: string) => MOVED.filter((moved) => moved.table === table);

/**
 * Every row of a table as JSON of the given columns, in a stable order: without the pool's statement
 * timeout, as the copy, for the whole shared test database may be big and the machine busy.
 */
async function rowsOf(table: string, columns: readonly string[]): Promise<string[]> {
  const rows = await inTransaction(scratch, async (tx) => {
    await tx.query(sql.unsafe`set local statement_timeout = 0`);
    return tx.anyFirst(
      sql.type(z.object({ row: z.string() }))`
        select jsonb_build_object(${sql.join(
          columns.flatMap((column) => [sql.literalValue(column), sql.identifier([schema, table, column])]),
          sql.fragment`, `,
        )})::text as row from ${sql.identifier([schema, table])}`,
    );
  });
  return [...rows].sort();
}

/** A column's values by the rows' key, where set, each as JSON: `rowsOf` of those two columns. */
async function valuesByKey(table: string, key: string, column: string) {
  return Object.fromEntries(
    (await rowsOf(table, [key, column]))
      .map((row) => JSON.parse(row) as Record<string, unknown>)
      .filter((row) => row[column] !== null)
      .map((row) => [row[key], row[column]]),
  );
}

describe('an upgrade from the previous release', () => {
  it('keeps every row of a database in use, and the services read them', async () => {
    // Data made by the services themselves on the shared test schema: an account with money and keys,
    // its realtime settings, an org; with whatever the other tests made.
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 7_000_000 });
    await ctx.container.realtime.setup({ appId: customer.app.id, mode: 'live' });
    const principal = await principalOf(customer.token);
    await inTransaction(ctx.container.pool, (tx) =>
      ctx.container.orgs.upsertOrg(principal, { externalId: 'acme', name: 'Acme' }, tx),
    );
    // A webhook delivery still to be sent (its receiver never answers: a name nothing resolves).
    const scope = { appId: customer.app.id, mode: 'live' as const };
    await ctx.container.webhooks.create(scope, {
      url: 'https://hooks.invalid/in',
      event_types: ['buzz.created'],
    });
    await inTransaction(ctx.container.pool, (tx) =>
      ctx.container.outbox.emit(tx, { ...scope, type: 'buzz.created', data: { id: 'bz_upgrade' } }),
    );

    await runMigrations(scratch, await migrationsUpTo(PREVIOUS_RELEASE));
    const tables = await tablesInOrder();
    // The previous release's schema, filled from one snapshot of the live one (all of it: with no
    // statement timeout, which a busy machine copying every other test's rows once went past).
    await inTransaction(scratch, async (tx) => {
      await tx.query(sql.unsafe`set transaction isolation level repeatable read`);
      await tx.query(sql.unsafe`set local statement_timeout = 0`);
      for (const table of tables) {
        const columns = await columnsOf(table, { written: true });
        // A column moved since is read from where it is now.
        const values = columns.map((column) => {
          const moved = MOVED.find((m) => m.table === table && m.column === column);
          if (!moved) return sql.identifier([column]);
          return sql.fragment`(select ${sql.identifier([moved.into.column])} from ${sql.identifier(['public', moved.into.table])}
            where ${sql.identifier([moved.into.key])} = ${sql.identifier(['source', moved.key])})`;
        });
        await tx.query(sql.unsafe`
          insert into ${sql.identifier([schema, table])} (${sql.join(
            columns.map((column) => sql.identifier([column])),
            sql.fragment`, `,
          )})
          overriding system value
          select ${sql.join(values, sql.fragment`, `)} from ${sql.identifier(['public', table])} source`);
      }
    });
    // Rows as they are, but for the columns moved, whose values are kept apart to find where they went.
    const before = new Map<string, { columns: readonly string[]; rows: string[] }>();
    const movedValues = new Map<(typeof MOVED)[number], Record<string, unknown>>();
    for (const table of tables) {
      const moving = movedFrom(table).map((moved) => moved.column);
      const columns = (await columnsOf(table)).filter((column) => !moving.includes(column));
      before.set(table, { columns, rows: await rowsOf(table, columns) });
      for (const moved of movedFrom(table))
        movedValues.set(moved, await valuesByKey(table, moved.key, moved.column));
    }
    expect(before.get('accounts')!.rows.length).toBeGreaterThan(0);
    expect(before.get('orgs')!.rows.length).toBeGreaterThan(0);
    expect(Object.keys(movedValues.get(MOVED[0]!)!).length).toBeGreaterThan(0);

    const applied = await runMigrations(scratch);
    expect(applied[0]! > PREVIOUS_RELEASE).toBe(true);
    for (const [table, { columns, rows }] of before)
      expect({ table, rows: await rowsOf(table, columns) }).toEqual({ table, rows });
    // A column moved is where it went, with every value.
    for (const [moved, values] of movedValues)
      expect({
        moved: moved.column,
        values: await valuesByKey(moved.into.table, moved.into.key, moved.into.column),
      }).toEqual({ moved: moved.column, values });

    // The new release's services on the upgraded data: the key still opens, the balance is there.
    const upgraded: Core = await createCore(testSettings({ SVC_DATABASE_URL: scratchUrl }));
    try {
      const check = await upgraded.accounts.checkSecretKey(customer.token);
      expect(check).toMatchObject({ ok: true, principal: { appId: customer.app.id } });
      expect((await upgraded.billing.getBalance(customer.account.id)).balance_micros).toBe(7_000_000);
    } finally {
      await upgraded.close();
    }
    // It copies the whole shared test database: minutes on a long-lived test stack (a soak leaves
    // millions of rows), seconds on a fresh one.
  }, 600_000);
});

async function principalOf(token: string) {
  const check = await ctx.container.accounts.checkSecretKey(token);
  if (!check.ok) throw new Error(`key refused: ${check.refusal}`);
  return check.principal;
}
