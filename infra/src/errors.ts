/**
 * A failure the operator can act on: the CLI prints its message without a stack trace and exits 1.
 * Anything else is a bug in the runner and keeps its stack.
 */
export class StackError extends Error {
  override name = 'StackError';
}

/** A wrong command line or setting; the CLI exits 2 as usual for usage errors. */
export class UsageError extends StackError {
  override name = 'UsageError';
}
