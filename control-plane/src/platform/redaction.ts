import { STATEMENT_VALUES } from '../db/pool.js';

/** The fields of an error (and of its causes) a log line keeps; payloads (values, rows) never. */
const KEPT = ['code', 'detail', 'hint', 'constraint', 'table', 'column', 'sql', 'statusCode'] as const;
/** Shorter parameters are ids, modes and numbers: nothing to hide, and they would blur messages. */
const SHORTEST_REDACTED = 6;

function parametersOf(error: unknown): string[] {
  const found: string[] = [];
  for (let current = error, depth = 0; current && depth < 5; depth += 1) {
    const values = (current as { [STATEMENT_VALUES]?: readonly unknown[] })[STATEMENT_VALUES];
    for (const value of values ?? []) {
      const text = typeof value === 'string' ? value : value === null ? '' : JSON.stringify(value);
      if (text && text.length >= SHORTEST_REDACTED) found.push(text);
    }
    current = (current as { cause?: unknown }).cause;
  }
  return found.sort((a, b) => b.length - a.length);
}

export interface LoggedError {
  type: string;
  message: string;
  stack: string;
  [field: string]: unknown;
}

/**
 * An error as the log shows it: its type, message, stack, codes and SQL, its causes likewise, and no
 * statement parameters or rows, even where PostgreSQL quoted one in a message or a detail (a failed
 * write of app settings carries the shield secret). The one serializer of every logged error.
 */
export function errorForLog(error: unknown): LoggedError {
  const parameters = parametersOf(error);
  const scrub = (text: string) =>
    parameters.reduce((scrubbed, value) => scrubbed.split(value).join('[redacted]'), text);
  const describe = (current: unknown, depth: number): LoggedError => {
    if (!(current instanceof Error))
      return { type: typeof current, message: scrub(String(current)), stack: '' };
    const fields: LoggedError = {
      type: current.name,
      message: scrub(current.message),
      stack: scrub(current.stack ?? ''),
    };
    for (const name of KEPT) {
      const value = (current as unknown as Record<string, unknown>)[name];
      if (typeof value === 'string') fields[name] = scrub(value);
      else if (typeof value === 'number') fields[name] = value;
    }
    if (current.cause !== undefined && depth < 4) fields.cause = describe(current.cause, depth + 1);
    return fields;
  };
  return describe(error, 0);
}

/** A dashboard invitation link's token: it signs its holder up, so logs never keep it. */
const INVITATION_PATH = /(\/dashboard\/invitations\/)[^/?#]+/;

/**
 * A request as the log shows it (fastify's fields), its URL without the secret an invitation link
 * carries in its path.
 */
export function requestForLog(request: {
  method: string;
  url: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}) {
  return {
    method: request.method,
    url: request.url.replace(INVITATION_PATH, '$1…'),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}
