import * as slonik from 'slonik';
import { ServiceError } from './errors.js';

/** slonik's errors for a PostgreSQL that went away, restarted or stalled past the statement timeout. */
const POSTGRES_ERRORS = [
  slonik.BackendTerminatedError,
  slonik.BackendTerminatedUnexpectedlyError,
  slonik.ConnectionError,
  slonik.IdleTransactionTimeoutError,
  slonik.StatementCancelledError,
  slonik.StatementTimeoutError,
];

/**
 * PostgreSQL's SQLSTATEs for the same: connection exceptions (class 08), an administrator's or a
 * crash's shutdown, a server still starting, no connection slot left.
 */
const POSTGRES_UNAVAILABLE = /^(08...|57P0[123]|53300)$/;

/** What slonik's driver says of a connection PostgreSQL cut as it stopped. */
const POSTGRES_CONNECTION_LOST =
  /^(Client is pending destroy|Connection terminated|Client has encountered a connection error)/;

/** A socket that could not be opened or was cut: what a stopped server looks like from a client. */
const SOCKET_FAILURES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH']);

/**
 * ioredis's errors while Redis is away (its client gives up after one retry and a 2 s command
 * timeout, see adapters/redis.ts).
 */
const REDIS_FAILURES = /^(Connection is closed|Command timed out|Stream isn't writeable)/;

/** The server whose absence the error shows: named where the error tells, a socket's failure otherwise. */
function unavailableServer(error: Error): 'PostgreSQL' | 'Redis' | 'a server this request needs' | undefined {
  const code = (error as { code?: unknown }).code;
  if (POSTGRES_ERRORS.some((type) => error instanceof type)) return 'PostgreSQL';
  if (typeof code === 'string' && POSTGRES_UNAVAILABLE.test(code)) return 'PostgreSQL';
  if (POSTGRES_CONNECTION_LOST.test(error.message)) return 'PostgreSQL';
  if (error.name === 'MaxRetriesPerRequestError' || REDIS_FAILURES.test(error.message)) return 'Redis';
  if (typeof code === 'string' && SOCKET_FAILURES.has(code)) {
    // slonik passes the socket's own error through when it cannot connect at all.
    return error.stack?.includes('/slonik/') ? 'PostgreSQL' : 'a server this request needs';
  }
  return undefined;
}

/**
 * A request that failed because PostgreSQL or Redis is down, restarting or stalled is a 503 the
 * client may retry shortly, not a 500: nothing is wrong with the request or the code, and nothing of
 * it was kept (its transaction never committed).
 */
export function unavailableDependency(error: unknown): ServiceError | undefined {
  if (!(error instanceof Error)) return undefined;
  const server = unavailableServer(error);
  if (!server) return undefined;
  return new ServiceError(
    'service_unavailable',
    `${server[0]!.toUpperCase()}${server.slice(1)} is unavailable; try again shortly`,
    { headers: { 'retry-after': '1' }, detail: `${error.name}: ${error.message}` },
  );
}
