import {
  AccessToken,
  type ParticipantInfo,
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

/** The control plane's only client of LiveKit: tokens, the room service and webhook verification. */
export function createLiveKitClient(settings: LiveKitSettings) {
  const rooms = new RoomServiceClient(settings.url, settings.apiKey, settings.apiSecret);
  const receiver = new WebhookReceiver(settings.apiKey, settings.apiSecret);

  return {
    /** Creates the room or, if it exists, updates its participant limit (createRoom is idempotent). */
    ensureRoom: (name: string, maxParticipants: number) =>
      rooms.createRoom({ name, maxParticipants, emptyTimeout: 300, departureTimeout: 20 }),

    mintToken: (options: {
      identity: string;
      room: string;
      ttlSeconds: number;
      grant: Omit<VideoGrant, 'room' | 'roomJoin'>;
      attributes: Record<string, string>;
    }) => {
      const token = new AccessToken(settings.apiKey, settings.apiSecret, {
        identity: options.identity,
        ttl: options.ttlSeconds,
        attributes: options.attributes,
      });
      token.addGrant({ ...options.grant, room: options.room, roomJoin: true });
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

    /** Verifies a webhook's signature (a JWT over the body's SHA-256) and parses it. */
    receiveWebhook: (body: string, authorization: string | undefined): Promise<WebhookEvent> =>
      receiver.receive(body, authorization),
  };
}

export type LiveKitClient = ReturnType<typeof createLiveKitClient>;
