import { describe, expect, it } from 'vitest';
import { statementNamer } from './prepared-statements.js';

describe('statementNamer', () => {
  const namer = (mostPrepared = 3, mostCounted = 100) =>
    statementNamer({ runsBeforePreparing: 2, mostPrepared, mostCounted });

  it('names a text from its second run on, always by the same name, and never two texts alike', () => {
    const nameOf = namer();
    expect(nameOf('select 1 where $1')).toBeUndefined();
    const first = nameOf('select 1 where $1');
    expect(first).toBeDefined();
    expect(nameOf('select 1 where $1')).toBe(first);
    nameOf('select 2 where $1');
    const second = nameOf('select 2 where $1');
    expect(second).toBeDefined();
    expect(second).not.toBe(first);
  });

  it('names no more texts than it may prepare; those named keep their names', () => {
    const nameOf = namer(2);
    for (const text of ['a', 'a', 'b', 'b']) nameOf(text);
    const [a, b] = [nameOf('a'), nameOf('b')];
    expect([a, b].every((name) => name !== undefined)).toBe(true);
    nameOf('c');
    expect(nameOf('c')).toBeUndefined();
    expect([nameOf('a'), nameOf('b')]).toEqual([a, b]);
  });

  it('starts counting over once too many texts ran once', () => {
    const nameOf = namer(3, 2);
    nameOf('x');
    nameOf('y');
    // The count is full: it starts over, and x's first run is forgotten.
    nameOf('z');
    expect(nameOf('x')).toBeUndefined();
    expect(nameOf('x')).toBeDefined();
  });
});
