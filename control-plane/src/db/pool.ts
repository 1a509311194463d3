import {
  createPool,
  createTypeParserPreset,
  type DatabasePool,
  type Interceptor,
  SchemaValidationError,
} from 'slonik';
import { prepareFrequentStatements } from './prepared-statements.js';

/**
 * Checks every row of a `sql.type(schema)` query against its zod schema: without this
 * interceptor slonik's types are promises the database never has to keep. Synchronous (the row
 * schemas have no async refinements): the async hook costs a promise queue per query.
 */
const resultParserInterceptor: Interceptor = {
  name: 'result-parser',
  transformRow: (context, query, row) => {
    const parser = context.resultParser;
    if (!parser) return row;
    const result = parser.safeParse(row);
    if (!result.success) throw new SchemaValidationError(query, row, result.error.issues);
    return result.data as typeof row;
  },
};

/** Where a failed statement's parameters travel with its error, for the log's redaction only. */
export const STATEMENT_VALUES = Symbol('svc.statementValues');

/**
 * Hands a failed statement's parameters to its error, unseen (not enumerable): PostgreSQL quotes
 * parameters in some messages ('invalid input syntax for type integer: "…"'), and the log redacts
 * them by value (platform/redaction.ts).
 */
const statementValuesInterceptor: Interceptor = {
  name: 'statement-values',
  queryExecutionError: (_context, query, error) => {
    Object.defineProperty(error, STATEMENT_VALUES, { value: query.values, enumerable: false });
    return null;
  },
};

/** int8 columns (money, counters) as plain numbers, refusing any value a double cannot hold exactly. */
const safeBigintParser = {
  name: 'int8',
  parse: (value: string) => {
    const parsed = Number(value);
    if (!Number.isSafeInteger(parsed))
      throw new RangeError(`int8 value out of the safe integer range: ${value}`);
    return parsed;
  },
};

/** timestamptz as Date objects. */
const timestamptzParser = { name: 'timestamptz', parse: (value: string) => new Date(value) };

/**
 * The URL with a setting for every session it opens, after any the URL sets itself (PostgreSQL's
 * `options`, where the last of a setting wins; of several `options` parameters slonik reads the last).
 */
export function withSessionSetting(url: string, name: string, value: string): string {
  const parsed = new URL(url);
  const options = parsed.searchParams.getAll('options').at(-1);
  parsed.searchParams.set('options', `${options ? `${options} ` : ''}-c ${name}=${value}`);
  return parsed.toString();
}

export interface PoolOptions {
  /** More slonik interceptors (tests count statements with one). */
  interceptors?: Interceptor[];
  maximumPoolSize?: number;
  /**
   * Every statement planned for its values on every call, prepared or not: its sessions keep the
   * parsed statement and never settle on a generic plan (made without the values), which for a search
   * reads what the values would have ruled out.
   */
  plannedForItsValues?: boolean;
}

export async function createDatabasePool(url: string, options: PoolOptions = {}): Promise<DatabasePool> {
  prepareFrequentStatements();
  const overridden = new Set([safeBigintParser.name, timestamptzParser.name]);
  const sessionUrl = options.plannedForItsValues
    ? withSessionSetting(url, 'plan_cache_mode', 'force_custom_plan')
    : url;
  return createPool(sessionUrl, {
    interceptors: [resultParserInterceptor, statementValuesInterceptor, ...(options.interceptors ?? [])],
    typeParsers: [
      ...createTypeParserPreset().filter((parser) => !overridden.has(parser.name)),
      safeBigintParser,
      timestamptzParser,
    ],
    maximumPoolSize: options.maximumPoolSize ?? 20,
    // slonik's default runs DISCARD ALL on every release: a round trip per request, and it throws away
    // every cached plan, PL/pgSQL's included, so svc_meter would be planned anew on each call. The
    // control plane leaves no session state behind: settings are SET LOCAL, and the one session-level
    // advisory lock (migrations) is released before its connection is.
    resetConnection: async () => {},
    // A deadlock or a serialization failure is an error to see: slonik would run the statement again,
    // inside a transaction already rolled back (a COMMIT retried so commits nothing, silently).
    queryRetryLimit: 0,
    connectionTimeout: 5_000,
    statementTimeout: 15_000,
  });
}
