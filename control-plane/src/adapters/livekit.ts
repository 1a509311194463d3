import {
  AccessToken,
  DataPacket_Kind,
  type ParticipantInfo,
  RoomConfiguration,
  RoomServiceClient,
  ServerError,
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
const EMPTY_TIMEOUT_SECONDS = 300;
const DEPARTURE_TIMEOUT_SECONDS = 20;

/**
 * The control plane's only client of LiveKit: tokens, the room service and webhook verification.
 * Rooms are created by LiveKit when a token first joins them (room.auto_create), with the limits the
 * token carries in its room configuration, so minting a token needs no call to LiveKit.
 */
export function createLiveKitClient(settings: LiveKitSettings) {
  const rooms = new RoomServiceClient(settings.url, settings.apiKey, settings.apiSecret);
  const receiver = new WebhookReceiver(settings.apiKey, settings.apiSecret);

  return {
    mintToken: (options: {
      identity: string;
      room: string;
      ttlSeconds: number;
      /** Applied when this token's join creates the room; a running room keeps its own. */
      maxParticipants: number;
      grant: Omit<VideoGrant, 'room' | 'roomJoin'>;
      attributes: Record<string, string>;
    }) => {
      const token = new AccessToken(settings.apiKey, settings.apiSecret, {
        identity: options.identity,
        ttl: options.ttlSeconds,
        attributes: options.attributes,
      });
      token.addGrant({ ...options.grant, room: options.room, roomJoin: true });
      token.roomConfig = new RoomConfiguration({
        maxParticipants: options.maxParticipants,
        emptyTimeout: EMPTY_TIMEOUT_SECONDS,
        departureTimeout: DEPARTURE_TIMEOUT_SECONDS,
      });
      return token.toJwt();
    },

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
     * Tells a participant why (a reliable data message on `topic`), then removes it from the room.
     * False when it had already left.
     */
    removeParticipant: async (
      room: string,
      identity: string,
      notice: { topic: string; payload: object },
    ): Promise<boolean> => {
      try {
        await rooms.sendData(room, Buffer.from(JSON.stringify(notice.payload)), DataPacket_Kind.RELIABLE, {
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
