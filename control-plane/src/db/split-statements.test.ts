import { describe, expect, it } from 'vitest';
import { splitStatements } from './split-statements.js';

describe('splitStatements', () => {
  it('splits on semicolons and drops comments and empty statements', () => {
    expect(
      splitStatements('create table a (x int); -- note; here\n;/* block; */ insert into a values (1);'),
    ).toEqual(['create table a (x int)', 'insert into a values (1)']);
  });

  it('keeps semicolons inside literals, identifiers and dollar-quoted bodies', () => {
    const script = `insert into t values ('a;b', 'it''s; fine');
create table "odd;name" (x int);
create function f() returns int language sql as $body$ select 1; $body$;
do $$ begin perform 1; end $$`;
    expect(splitStatements(script)).toEqual([
      "insert into t values ('a;b', 'it''s; fine')",
      'create table "odd;name" (x int)',
      'create function f() returns int language sql as $body$ select 1; $body$',
      'do $$ begin perform 1; end $$',
    ]);
  });

  it('treats a lone dollar sign (a positional parameter) as text', () => {
    expect(splitStatements('select $1; select 2')).toEqual(['select $1', 'select 2']);
  });
});
