/**
 * Splits a SQL script into its statements. slonik runs one statement per query (the extended
 * protocol), so a migration file is run statement by statement inside one transaction. Semicolons
 * inside quotes, quoted identifiers, dollar-quoted bodies and comments do not split.
 */
export function splitStatements(script: string): string[] {
  const statements: string[] = [];
  let current = '';
  let i = 0;
  const flush = () => {
    const statement = current.trim();
    if (statement !== '') statements.push(statement);
    current = '';
  };
  /** Copies from i up to and including the end marker (or the end of the script). */
  const copyUntil = (end: string, from: number) => {
    const stop = script.indexOf(end, from);
    const next = stop === -1 ? script.length : stop + end.length;
    current += script.slice(i, next);
    i = next;
  };
  while (i < script.length) {
    const char = script[i]!;
    const pair = script.slice(i, i + 2);
    if (pair === '--') {
      const stop = script.indexOf('\n', i);
      i = stop === -1 ? script.length : stop + 1;
    } else if (pair === '/*') {
      const stop = script.indexOf('*/', i + 2);
      i = stop === -1 ? script.length : stop + 2;
    } else if (char === "'" || char === '"') {
      // A doubled quote inside is an escaped quote: two adjacent literals, same result.
      copyUntil(char, i + 1);
    } else if (char === '$') {
      const tag = /^\$[A-Za-z_]*\$/.exec(script.slice(i))?.[0];
      if (tag) copyUntil(tag, i + tag.length);
      else {
        current += char;
        i += 1;
      }
    } else if (char === ';') {
      flush();
      i += 1;
    } else {
      current += char;
      i += 1;
    }
  }
  flush();
  return statements;
}
