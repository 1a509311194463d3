import {
  type CommonQueryMethods,
  type DatabaseConnection,
  type DatabasePool,
  type QueryResult,
  sql,
} from 'slonik';
import { z } from 'zod';

/** Anything that runs SQL: the pool, a connection or a transaction. Stores take one of these. */
export type Db = Omit<CommonQueryMethods, 'stream' | 'transaction'>;

/**
 * A tag for statements whose rows nobody reads, like `sql.unsafe` but cheaper: each `sql.unsafe`
 * builds a zod parser of its own, which on a hot path costs more than sending the statement.
 */
export const statement = sql.type(z.any());

const BEGIN = statement`begin`;
const COMMIT = statement`commit`;
const ROLLBACK = statement`rollback`;

/** The query methods a transaction hands out: each sends BEGIN first if nothing has yet. */
const QUERY_METHODS = [
  'any',
  'anyFirst',
  'exists',
  'many',
  'manyFirst',
  'maybeOne',
  'maybeOneFirst',
  'one',
  'oneFirst',
  'query',
] as const satisfies readonly (keyof Db)[];

/**
 * A transaction on one connection that begins with its first statement: work that turns out to need
 * no SQL costs no round trip, and a caller can tell whether anything was written (`begun`).
 *
 * The project's one way to run a transaction, instead of slonik's `transaction()`: that one runs in
 * an AsyncLocalStorage, and on Node 20 the first such run switches on promise hooks for the whole
 * process, which every promise of every request then pays for. It also retries a deadlocked handler,
 * side effects and all; here a deadlock is an error (every writer takes rows in one documented order).
 */
export interface OpenTransaction {
  readonly db: Db;
  begun(): boolean;
  /** Ends the transaction; its result carries the notices the commit raised (deferred triggers'). */
  commit(): Promise<QueryResult<Record<string, unknown>> | undefined>;
  rollback(): Promise<void>;
}

/** A transaction on `connection`, or on a connection `connect` gives with the first statement. */
export function openTransaction(
  connection: DatabaseConnection | (() => Promise<DatabaseConnection>),
): OpenTransaction {
  const connect = typeof connection === 'function' ? connection : () => Promise.resolve(connection);
  let state: 'idle' | 'begun' | 'ended' = 'idle';
  let beginning: Promise<DatabaseConnection> | undefined;
  const begin = () => {
    if (state === 'ended') throw new Error('the transaction has ended');
    state = 'begun';
    beginning ??= connect().then(async (connected) => {
      await connected.query(BEGIN);
      return connected;
    });
    return beginning;
  };
  const db = Object.fromEntries(
    QUERY_METHODS.map((name) => [
      name,
      async (...args: unknown[]) => {
        const connected = await begin();
        return (connected[name] as (...a: unknown[]) => Promise<unknown>)(...args);
      },
    ]),
  ) as unknown as Db;
  const end = async (statement: typeof COMMIT) => {
    const begun = state === 'begun';
    state = 'ended';
    if (!begun) return undefined;
    // No connection (the pool had none to give): nothing began, and the caller has that error.
    const connected = await beginning!.catch(() => undefined);
    return connected?.query(statement);
  };
  return {
    db,
    begun: () => state === 'begun',
    // A failed commit (a deferred trigger's error) has rolled everything back already.
    commit: () => end(COMMIT),
    rollback: async () => void (await end(ROLLBACK)),
  };
}

/**
 * A transaction that takes a connection from the pool with its first statement and gives it back
 * with `release()`: work that sends no SQL, or reads through the pool, holds no connection.
 */
export function openPoolTransaction(pool: DatabasePool): OpenTransaction & { release(): Promise<void> } {
  let held: Promise<DatabaseConnection> | undefined;
  let giveBack: (() => void) | undefined;
  let returned: Promise<unknown> = Promise.resolve();
  const connect = () => {
    held ??= new Promise<DatabaseConnection>((resolve, reject) => {
      returned = pool
        .connect((connection) => {
          resolve(connection);
          return new Promise<void>((release) => {
            giveBack = release;
          });
        })
        .catch(reject);
    });
    return held;
  };
  return {
    ...openTransaction(connect),
    release: async () => {
      giveBack?.();
      await returned;
    },
  };
}

/** Runs `work` in a transaction, committed when it returns, else rolled back. */
export async function withTransaction<T>(
  pool: DatabasePool,
  work: (db: Db, transaction: OpenTransaction) => Promise<T>,
): Promise<T> {
  const transaction = openPoolTransaction(pool);
  try {
    let result: T;
    try {
      result = await work(transaction.db, transaction);
    } catch (error) {
      await transaction.rollback();
      throw error;
    }
    await transaction.commit();
    return result;
  } finally {
    await transaction.release();
  }
}
