import { describe, expect, it } from 'vitest';
import { eventData } from './ai-provider.js';

/** The events' data of a stream that arrives in these pieces. */
async function dataOf(...pieces: (string | Uint8Array)[]) {
  async function* stream() {
    for (const piece of pieces) yield typeof piece === 'string' ? new TextEncoder().encode(piece) : piece;
  }
  const events: string[] = [];
  for await (const data of eventData(stream())) events.push(data);
  return events;
}

describe('server-sent events', () => {
  it('gives each event its data, whatever the line ends and however the stream is cut', async () => {
    expect(await dataOf('data: {"a":1}\n\ndata: [DONE]\n\n')).toEqual(['{"a":1}', '[DONE]']);
    expect(await dataOf('data: one\r\n\r\ndata:two\r\r')).toEqual(['one', 'two']);
    // Cut inside a line, between the CR and LF of one line end, and inside a character.
    const euro = new TextEncoder().encode('data: €\n\n');
    expect(
      await dataOf('da', 'ta: x\r', '\n\r\n', euro.subarray(0, 7), euro.subarray(7), 'data: y\n', '\n'),
    ).toEqual(['x', '€', 'y']);
  });

  it('joins the data lines of one event, and skips comments and other fields', async () => {
    expect(await dataOf(': ping\n\nevent: chunk\nid: 7\ndata: a\ndata:  b\ndata\n\n')).toEqual(['a\n b\n']);
    expect(await dataOf(': ping\n\n: ping\n\n')).toEqual([]);
  });

  it('drops an event the stream leaves unfinished', async () => {
    expect(await dataOf('data: whole\n\ndata: cut')).toEqual(['whole']);
    expect(await dataOf('data: cut\n')).toEqual([]);
  });
});
