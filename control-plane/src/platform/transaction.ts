import type { CommonQueryMethods, DatabasePool, DatabaseTransactionConnection } from 'slonik';

/** Anything that runs SQL: the pool, a connection or a transaction. Stores take one of these. */
export type Db = CommonQueryMethods;

/**
 * A database transaction that can schedule work for after its commit: cache invalidations and
 * other notices about what it changed, which must not run if it rolls back.
 */
export interface Transaction extends DatabaseTransactionConnection {
  afterCommit(task: () => Promise<void>): void;
}

/**
 * Runs `work` in a transaction, then the tasks it scheduled for after the commit. A failing task is
 * handed to `onTaskError`: the commit stands, and what a task refreshes has a safety net of its own.
 */
export async function inTransaction<T>(
  pool: DatabasePool,
  work: (tx: Transaction) => Promise<T>,
  onTaskError: (error: unknown) => void = () => {},
): Promise<T> {
  const tasks: (() => Promise<void>)[] = [];
  const result = await pool.transaction((tx) =>
    work(Object.assign(tx, { afterCommit: (task: () => Promise<void>) => void tasks.push(task) })),
  );
  for (const task of tasks) await task().catch(onTaskError);
  return result;
}
