import { AccessToken, RoomConfiguration, TrackSource } from 'livekit-server-sdk';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createTokenSigner, DEPARTURE_TIMEOUT_SECONDS, EMPTY_TIMEOUT_SECONDS } from './livekit.js';

const KEY = 'APIexample';
const SECRET = 'a-secret-of-at-least-thirty-two-characters';
const at = new Date('2026-11-23T10:20:30.456Z');

/** The same token through the SDK, at the same instant. */
async function sdkToken(options: {
  identity: string;
  room: string;
  ttl: number;
  max: number;
  grant: object;
  attributes: Record<string, string>;
}) {
  vi.useFakeTimers({ now: at });
  const token = new AccessToken(KEY, SECRET, {
    identity: options.identity,
    ttl: options.ttl,
    attributes: options.attributes,
  });
  token.addGrant({ ...options.grant, room: options.room, roomJoin: true });
  token.roomConfig = new RoomConfiguration({
    maxParticipants: options.max,
    emptyTimeout: EMPTY_TIMEOUT_SECONDS,
    departureTimeout: DEPARTURE_TIMEOUT_SECONDS,
  });
  return token.toJwt();
}

afterEach(() => {
  vi.useRealTimers();
});

describe('LiveKit tokens', () => {
  const sign = createTokenSigner(KEY, SECRET);

  it.each([
    ['a viewer', { canSubscribe: true, canPublish: false, canPublishData: false }],
    [
      'a publisher',
      {
        canSubscribe: true,
        canPublish: true,
        canPublishData: true,
        canPublishSources: [TrackSource.CAMERA, TrackSource.MICROPHONE, TrackSource.SCREEN_SHARE_AUDIO],
      },
    ],
  ])('are what the SDK signs, byte for byte, for %s', async (_who, grant) => {
    const claims = {
      identity: 'user-7 ü',
      room: 'abcdefghij.show_1',
      attributes: { 'svc.kind': 'live', 'svc.quality': 'fhd', 'svc.publisher': 'false' },
    };
    const expected = await sdkToken({ ...claims, ttl: 7_200, max: 100, grant });
    expect(sign({ ...claims, ttlSeconds: 7_200, maxParticipants: 100, grant, at })).toBe(expected);
  });

  it('differ with every claim', () => {
    const base = {
      identity: 'u',
      room: 'p.r',
      ttlSeconds: 60,
      maxParticipants: 2,
      grant: { canSubscribe: true },
      attributes: {},
      at,
    };
    const tokens = new Set([
      sign(base),
      sign({ ...base, identity: 'v' }),
      sign({ ...base, room: 'p.s' }),
      sign({ ...base, ttlSeconds: 61 }),
      sign({ ...base, maxParticipants: 3 }),
      sign({ ...base, at: new Date(at.getTime() + 1_000) }),
    ]);
    expect(tokens.size).toBe(6);
  });
});
