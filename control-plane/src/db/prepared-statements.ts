import pg from 'pg';

/** Runs of one statement's text before it is prepared: a text built once (a one-off batch) is not. */
const RUNS_BEFORE_PREPARING = 2;
/**
 * Texts prepared at most, each on every connection that runs it: PostgreSQL keeps a prepared
 * statement's plan in the backend's memory for the connection's life.
 */
const MOST_PREPARED = 256;
/** Texts counted at most: texts that vary (a list of n values) would otherwise grow the count forever. */
const MOST_COUNTED = 10_000;

/**
 * Names a statement's text once it has run often enough: the same name for the same text, never for
 * two texts, and none past `mostPrepared` names (those run unprepared, as before).
 */
export function statementNamer(
  options: { runsBeforePreparing: number; mostPrepared: number; mostCounted: number } = {
    runsBeforePreparing: RUNS_BEFORE_PREPARING,
    mostPrepared: MOST_PREPARED,
    mostCounted: MOST_COUNTED,
  },
) {
  const names = new Map<string, string>();
  const runs = new Map<string, number>();
  return (text: string): string | undefined => {
    const name = names.get(text);
    if (name !== undefined) return name;
    if (names.size >= options.mostPrepared) return undefined;
    const count = (runs.get(text) ?? 0) + 1;
    if (count < options.runsBeforePreparing) {
      if (runs.size >= options.mostCounted) runs.clear();
      runs.set(text, count);
      return undefined;
    }
    runs.delete(text);
    const named = `svc_${names.size + 1}`;
    names.set(text, named);
    return named;
  };
}

type Query = (config: unknown, values?: unknown, callback?: unknown) => unknown;
let installed = false;

/**
 * Every pg client of the process prepares the statements it runs often (by their text), so that
 * PostgreSQL parses each once per connection and, when its generic plan serves as well as a fresh
 * one, plans it once too: planning was most of what a list cost PostgreSQL. slonik hands pg the
 * text and values of each statement and offers no way to name one, so pg's own query method is
 * wrapped, once, for the process. A connection must then keep its session: connect directly or
 * through a session-mode pooler (PgBouncer in transaction mode needs its prepared-statement support).
 */
export function prepareFrequentStatements(): void {
  if (installed) return;
  installed = true;
  const nameOf = statementNamer();
  const prototype = pg.Client.prototype as unknown as { query: Query };
  const query = prototype.query;
  prototype.query = function (this: pg.Client, config, values, callback) {
    if (typeof config === 'string' && Array.isArray(values) && values.length > 0) {
      const name = nameOf(config);
      if (name !== undefined) return query.call(this, { name, text: config, values }, callback);
    }
    return query.call(this, config, values, callback);
  };
}
