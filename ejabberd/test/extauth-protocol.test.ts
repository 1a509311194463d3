import { describe, expect, it } from 'vitest';
import { ASKED_OPS, createFrameReader, encodeReply, parseRequest } from '../extauth-protocol.mjs';
import { frame } from './frames.js';

describe('createFrameReader', () => {
  it('returns each complete frame, several from one chunk', () => {
    const read = createFrameReader();
    expect(read(Buffer.concat([frame('isuser:a.b:chat.local'), frame('auth:a.b:chat.local:pw')]))).toEqual([
      'isuser:a.b:chat.local',
      'auth:a.b:chat.local:pw',
    ]);
  });

  it('waits for the rest of a frame split anywhere, including inside its length', () => {
    const read = createFrameReader();
    const bytes = Buffer.concat([frame('auth:ü.x:chat.local:pässword'), frame('isuser:u:h')]);
    const frames: string[] = [];
    for (const byte of bytes) frames.push(...read(Buffer.from([byte])));
    expect(frames).toEqual(['auth:ü.x:chat.local:pässword', 'isuser:u:h']);
  });

  it('keeps an empty frame as an empty request', () => {
    expect(createFrameReader()(frame(''))).toEqual(['']);
  });
});

describe('parseRequest', () => {
  it('splits on the first three colons only: the password keeps its colons', () => {
    expect(parseRequest('auth:abc123defg.ana:chat.local:p:a::ss:')).toEqual({
      op: 'auth',
      user: 'abc123defg.ana',
      server: 'chat.local',
      password: 'p:a::ss:',
    });
  });

  it('has no password for isuser, and an empty one when the field is empty', () => {
    expect(parseRequest('isuser:u:chat.local')).toEqual({
      op: 'isuser',
      user: 'u',
      server: 'chat.local',
      password: undefined,
    });
    expect(parseRequest('auth:u:chat.local:').password).toBe('');
  });

  it('leaves missing fields undefined', () => {
    expect(parseRequest('auth')).toEqual({
      op: 'auth',
      user: undefined,
      server: undefined,
      password: undefined,
    });
  });
});

describe('encodeReply', () => {
  it('is exactly length 2, then a 16-bit 0 or 1', () => {
    expect([...encodeReply(true)]).toEqual([0, 2, 0, 1]);
    expect([...encodeReply(false)]).toEqual([0, 2, 0, 0]);
  });
});

describe('ASKED_OPS', () => {
  it('asks the control plane about auth and isuser only', () => {
    expect([...ASKED_OPS].sort()).toEqual(['auth', 'isuser']);
  });
});
