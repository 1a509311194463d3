import { createHmac } from 'node:crypto';
import {
  DataPacket_Kind,
  type ParticipantInfo,
  RoomConfiguration,
  RoomServiceClient,
  ServerError,
  TrackSource,
  type VideoGrant,
  type WebhookEvent,
  WebhookReceiver,
} from 'livekit-server-sdk';

export interface LiveKitSettings {
  url: string;
  apiKey: string;
  apiSecret: string;
}

/** How long an empty room waits for its first participant, and for a next one after the last left. */
export const EMPTY_TIMEOUT_SECONDS = 300;
export const DEPARTURE_TIMEOUT_SECONDS = 20;

const TRACK_SOURCE_NAMES: Partial<Record<TrackSource, string>> = {
  [TrackSource.CAMERA]: 'camera',
  [TrackSource.MICROPHONE]: 'microphone',
  [TrackSource.SCREEN_SHARE]: 'screen_share',
  [TrackSource.SCREEN_SHARE_AUDIO]: 'screen_share_audio',
};

const base64url = (text: string) => Buffer.from(text, 'utf8').toString('base64url');
/** `{"alg":"HS256"}`, the header the SDK writes. */
const HEADER = base64url('{"alg":"HS256"}');

export interface TokenClaims {
  identity: string;
  room: string;
  ttlSeconds: number;
  /** Applied when this token's join creates the room; a running room keeps its own. */
  maxParticipants: number;
  grant: Omit<VideoGrant, 'room' | 'roomJoin'>;
  attributes: Record<string, string>;
  /** The signing time (real time: LiveKit checks it against its own clock). */
  at?: Date;
}

/**
 * LiveKit access tokens: HS256 JWTs with the claims AccessToken.toJwt() writes, in the same order,
 * signed with node:crypto (the SDK imports the key and signs through WebCrypto for every token). A
 * test holds it to the SDK's output, byte for byte.
 */
export function createTokenSigner(apiKey: string, apiSecret: string) {
  const roomConfigs = new Map<number, unknown>();
  const roomConfigOf = (maxParticipants: number) => {
    let config = roomConfigs.get(maxParticipants);
    if (!config) {
      config = new RoomConfiguration({
        maxParticipants,
        emptyTimeout: EMPTY_TIMEOUT_SECONDS,
        departureTimeout: DEPARTURE_TIMEOUT_SECONDS,
      }).toJson({ emitDefaultValues: true });
      roomConfigs.set(maxParticipants, config);
    }
    return config;
  };
  return (claims: TokenClaims): string => {
    const now = Math.floor((claims.at ?? new Date()).getTime() / 1000);
    const { canPublishSources, ...grant } = claims.grant;
    const video = {
      ...grant,
      ...(canPublishSources
        ? { canPublishSources: canPublishSources.map((s) => TRACK_SOURCE_NAMES[s]) }
        : {}),
      room: claims.room,
      roomJoin: true,
    };
    const payload = base64url(
      JSON.stringify({
        attributes: claims.attributes,
        video,
        roomConfig: roomConfigOf(claims.maxParticipants),
        iss: apiKey,
        exp: now + claims.ttlSeconds,
        nbf: now,
        sub: claims.identity,
      }),
    );
    const signature = createHmac('sha256', apiSecret).update(`${HEADER}.${payload}`).digest('base64url');
    return `${HEADER}.${payload}.${signature}`;
  };
}

/**
 * The control plane's only client of LiveKit: tokens, the room service and webhook verification.
 * Rooms are created by LiveKit when a token first joins them (room.auto_create), with the limits the
 * token carries in its room configuration, so minting a token needs no call to LiveKit.
 */
export function createLiveKitClient(settings: LiveKitSettings) {
  const rooms = new RoomServiceClient(settings.url, settings.apiKey, settings.apiSecret);
  const receiver = new WebhookReceiver(settings.apiKey, settings.apiSecret);

  return {
    mintToken: createTokenSigner(settings.apiKey, settings.apiSecret),

    /** The room's current participants; none when LiveKit no longer has the room. */
    listParticipants: async (room: string): Promise<ParticipantInfo[]> => {
      try {
        return await rooms.listParticipants(room);
      } catch (error) {
        if (error instanceof ServerError && error.status === 404) return [];
        throw error;
      }
    },

    /**
     * Tells a participant why, then removes it from the room; false when it had already left. The
     * reason goes into the participant's attributes under `topic` (that update travels on the
     * signalling connection ahead of the removal) and, for clients listening for data, as a reliable
     * data message on `topic` (which LiveKit may drop when the removal closes the connection first).
     */
    removeParticipant: async (
      room: string,
      identity: string,
      notice: { topic: string; payload: object },
    ): Promise<boolean> => {
      const text = JSON.stringify(notice.payload);
      try {
        await rooms.updateParticipant(room, identity, { attributes: { [notice.topic]: text } });
        await rooms.sendData(room, Buffer.from(text), DataPacket_Kind.RELIABLE, {
          destinationIdentities: [identity],
          topic: notice.topic,
        });
        await rooms.removeParticipant(room, identity);
        return true;
      } catch (error) {
        if (error instanceof ServerError && error.status === 404) return false;
        throw error;
      }
    },

    /** Verifies a webhook's signature (a JWT over the body's SHA-256) and parses it. */
    receiveWebhook: (body: string, authorization: string | undefined): Promise<WebhookEvent> =>
      receiver.receive(body, authorization),
  };
}

export type LiveKitClient = ReturnType<typeof createLiveKitClient>;
