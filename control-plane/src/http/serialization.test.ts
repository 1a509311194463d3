import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import { Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import { literalUnion } from '../platform/schemas.js';
import { forSerializing } from './serialization.js';

const compile = SerializerSelector()({}, {});
const serializer = (schema: unknown) => compile({ schema, method: 'GET', url: '/', httpStatus: '200' });

const Answer = Type.Object(
  {
    verdict: Type.Union([Type.Literal('ok'), Type.Literal('bot')], { description: 'The verdict' }),
    kind: literalUnion(['topup', 'usage'] as const),
    reason: Type.Union([Type.Literal('failing'), Type.Null()]),
    title: Type.Union([Type.String(), Type.Null()]),
    at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    owner: Type.Union([Type.Object({ id: Type.String(), n: Type.Integer() }), Type.Null()]),
    tags: Type.Array(Type.Union([Type.Literal('a'), Type.Literal('b')])),
    caption: Type.Union([Type.Literal(''), Type.String({ minLength: 3 })]),
    either: Type.Union([Type.String(), Type.Integer()]),
  },
  { additionalProperties: false },
);

describe('response schemas for the serializer', () => {
  it('writes unions of string literals as an enum, and a union with null as nullable', () => {
    const rewritten = forSerializing(Answer) as { properties: Record<string, unknown> };
    expect(rewritten.properties.verdict).toEqual({
      type: 'string',
      enum: ['ok', 'bot'],
      description: 'The verdict',
    });
    expect(rewritten.properties.kind).toEqual({ type: 'string', enum: ['topup', 'usage'] });
    expect(rewritten.properties.reason).toEqual({ type: 'string', enum: ['failing'], nullable: true });
    expect(rewritten.properties.title).toEqual({ type: 'string', nullable: true });
    expect(rewritten.properties.at).toEqual({ type: 'string', format: 'date-time', nullable: true });
    expect(rewritten.properties.owner).toMatchObject({
      type: 'object',
      nullable: true,
      required: ['id', 'n'],
    });
    expect(rewritten.properties.tags).toEqual({ type: 'array', items: { type: 'string', enum: ['a', 'b'] } });
    // Other unions stay unions: the serializer must still tell their options apart.
    expect(rewritten.properties.caption).toHaveProperty('anyOf');
    expect(rewritten.properties.either).toHaveProperty('anyOf');
    // The declared schema (the OpenAPI document's, request validation's) is left as it was.
    expect((Answer.properties.verdict as { anyOf?: unknown }).anyOf).toHaveLength(2);
  });

  it('writes every answer exactly as the declared schema does', () => {
    const declared = serializer(Answer);
    const rewritten = serializer(forSerializing(Answer));
    const answers = [
      {
        verdict: 'ok',
        kind: 'topup',
        reason: null,
        title: null,
        at: null,
        owner: null,
        tags: [],
        caption: '',
        either: 'x',
      },
      {
        verdict: 'bot',
        kind: 'usage',
        reason: 'failing',
        title: 'A "quoted" title\n',
        at: new Date('2026-11-29T12:00:00.000Z'),
        owner: { id: 'u1', n: 3, extra: 'not written' },
        tags: ['a', 'b'],
        caption: 'a caption',
        either: 7,
      },
      {
        verdict: 'ok',
        kind: 'usage',
        reason: null,
        title: '',
        at: '2026-11-29T12:00:00.000Z',
        owner: { id: '', n: 0 },
        tags: ['b'],
        caption: 'abc',
        either: 0,
      },
    ];
    for (const answer of answers) expect(rewritten(answer)).toBe(declared(answer));
  });
});
