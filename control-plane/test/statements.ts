import type { Interceptor } from 'slonik';

/** Records the text of every statement a pool sends (white space folded), for tests of round trips. */
export function statementRecorder() {
  const statements: string[] = [];
  const interceptor: Interceptor = {
    name: 'statement-recorder',
    beforeQueryExecution: (_context, query) => {
      statements.push(query.sql.replace(/\s+/g, ' ').trim());
      return null;
    },
  };
  return { statements, interceptor };
}
