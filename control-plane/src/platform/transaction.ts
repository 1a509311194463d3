import type { DatabasePool } from 'slonik';
import { type Db, type OpenTransaction, withTransaction } from '../db/transaction.js';

export type { Db } from '../db/transaction.js';

/**
 * A database transaction that can schedule work for after its commit: cache invalidations and
 * other notices about what it changed, which must not run if it rolls back.
 */
export interface Transaction extends Db {
  afterCommit(task: () => Promise<void>): void;
}

/** A transaction's handle for its work, and the tasks its work scheduled for after the commit. */
export function withAfterCommit(open: OpenTransaction) {
  const tasks: (() => Promise<void>)[] = [];
  const tx: Transaction = { ...open.db, afterCommit: (task) => void tasks.push(task) };
  return {
    tx,
    runTasks: async (onTaskError: (error: unknown) => void) => {
      for (const task of tasks) await task().catch(onTaskError);
    },
  };
}

/** The SQLSTATE PostgreSQL answered a statement with (slonik keeps pg's error as the cause). */
export function sqlState(error: unknown): string | undefined {
  const { code, cause } = (error ?? {}) as { code?: unknown; cause?: { code?: unknown } };
  const state = typeof code === 'string' ? code : cause?.code;
  return typeof state === 'string' && /^[0-9A-Z]{5}$/.test(state) ? state : undefined;
}

const WROTE_NOTHING = Symbol('wrote nothing');

/**
 * Marks the error of a work whose statements so far wrote and locked nothing (an UPDATE that matched
 * no row): in a turn of calls charged together, it fails alone rather than running the turn again.
 */
export function wroteNothing<E extends Error>(error: E): E {
  return Object.assign(error, { [WROTE_NOTHING]: true });
}

export const leftNothing = (error: unknown) =>
  typeof error === 'object' && error !== null && WROTE_NOTHING in error;

/**
 * Runs `work` in a transaction, then the tasks it scheduled for after the commit. A failing task is
 * handed to `onTaskError`: the commit stands, and what a task refreshes has a safety net of its own.
 */
export async function inTransaction<T>(
  pool: DatabasePool,
  work: (tx: Transaction) => Promise<T>,
  onTaskError: (error: unknown) => void = () => {},
): Promise<T> {
  let after: ReturnType<typeof withAfterCommit> | undefined;
  const result = await withTransaction(pool, (_db, open) => {
    after = withAfterCommit(open);
    return work(after.tx);
  });
  await after!.runTasks(onTaskError);
  return result;
}
