/**
 * Headless WebRTC participants for the e2e tests: @livekit/rtc-node (libwebrtc behind a native
 * binding shipped in the npm package) joined to the test stack's LiveKit over loopback, publishing
 * synthetic camera frames and a tone instead of real devices.
 */
import { setTimeout as delay } from 'node:timers/promises';
import {
  AudioFrame,
  AudioSource,
  AudioStream,
  type DisconnectReason,
  dispose,
  LocalAudioTrack,
  type LocalTrack,
  LocalVideoTrack,
  type RemoteTrack,
  type RemoteTrackPublication,
  Room,
  RoomEvent,
  TrackKind,
  TrackPublishOptions,
  TrackSource,
  VideoBufferType,
  VideoFrame,
  VideoSource,
  VideoStream,
} from '@livekit/rtc-node';
import { RoomServiceClient } from 'livekit-server-sdk';
import { stackSettings } from './stack.js';

const SAMPLE_RATE = 48_000;
/** 10 ms of mono audio, the frame size libwebrtc's audio pipeline works in. */
const SAMPLES_PER_FRAME = SAMPLE_RATE / 100;
const VIDEO_FPS = 15;

export type MediaKind = 'audio' | 'video';

/** What a participant received of another's track: the first decoded frame proves media flows. */
export interface ReceivedTrack {
  identity: string;
  kind: MediaKind;
  trackSid: string;
  /** The first video frame's size (video only). */
  width?: number;
  height?: number;
}

/**
 * What the server told a participant, in the order it arrived: changes of its own attributes, data
 * messages, then its disconnection.
 */
export type RoomNotice =
  | { type: 'attributes'; changed: Record<string, string> }
  | { type: 'data'; topic: string | undefined; payload: string; from: string | undefined }
  | { type: 'disconnected'; reason: DisconnectReason };

export interface LiveParticipant {
  readonly room: Room;
  readonly identity: string;
  /** When the join completed and when the leave did (ms since the epoch), to check metered minutes. */
  readonly joinedAt: number;
  readonly leftAt: number | undefined;
  /** Publishes a camera track fed with frames of this size until `leave`; resolves with its sid. */
  publishVideo(width: number, height: number): Promise<string>;
  /** Publishes a microphone track fed with a tone until `leave`; resolves with its sid. */
  publishAudio(): Promise<string>;
  /** Waits until `from`'s track of that kind is subscribed and its first frame has arrived. */
  waitForRemoteTrack(from: string, kind: MediaKind, timeoutMs?: number): Promise<ReceivedTrack>;
  /** Its own attribute changes, the data messages and the disconnection (not asked for here), in order. */
  readonly notices: readonly RoomNotice[];
  /** Waits until the room disconnects this participant (an earlier disconnection counts). */
  waitForDisconnect(timeoutMs?: number): Promise<Extract<RoomNotice, { type: 'disconnected' }>>;
  /** Stops the sources and disconnects; safe to call more than once, and after the room sent it away. */
  leave(): Promise<void>;
}

function publishOptions(source: TrackSource): TrackPublishOptions {
  const options = new TrackPublishOptions();
  options.source = source;
  // One layer at the full size, so the SFU forwards (and a subscriber decodes) exactly what was sent.
  options.simulcast = false;
  return options;
}

/** An I420 frame whose brightness changes every frame, so the encoder keeps sending real data. */
function startVideoFeed(source: VideoSource, width: number, height: number): () => void {
  const lumaSize = width * height;
  const data = new Uint8Array(lumaSize + lumaSize / 2);
  data.fill(128, lumaSize);
  let frame = 0;
  const timer = setInterval(() => {
    frame += 1;
    data.fill((frame * 8) % 256, 0, lumaSize);
    source.captureFrame(new VideoFrame(data, width, height, VideoBufferType.I420));
  }, 1000 / VIDEO_FPS);
  return () => clearInterval(timer);
}

/**
 * A 440 Hz tone; captureFrame waits while the source's queue is full, which paces the loop. The stop
 * resolves once the capture in flight has finished: closing the source disposes its native handle,
 * which a capture still in flight would use after it was freed. It waits at most a second, so that a
 * capture that never ends cannot hold the leave up.
 */
function startAudioFeed(source: AudioSource): () => Promise<void> {
  let running = true;
  const loop = (async () => {
    let sample = 0;
    while (running) {
      const frame = AudioFrame.create(SAMPLE_RATE, 1, SAMPLES_PER_FRAME);
      for (let i = 0; i < SAMPLES_PER_FRAME; i += 1, sample += 1) {
        frame.data[i] = Math.round(8_000 * Math.sin((2 * Math.PI * 440 * sample) / SAMPLE_RATE));
      }
      await source.captureFrame(frame).catch(() => {
        running = false;
      });
    }
  })();
  return () => {
    running = false;
    return Promise.race([loop, delay(1_000, undefined, { ref: false })]);
  };
}

/** Reads the first frame of a subscribed track, then releases the native stream. */
async function firstFrame(track: RemoteTrack, kind: MediaKind): Promise<{ width?: number; height?: number }> {
  if (kind === 'video') {
    const reader = new VideoStream(track).getReader();
    const { value } = await reader.read();
    await reader.cancel();
    return { width: value?.frame.width, height: value?.frame.height };
  }
  const reader = new AudioStream(track).getReader();
  await reader.read();
  await reader.cancel();
  return {};
}

interface Subscription {
  track: RemoteTrack;
  publication: RemoteTrackPublication;
  identity: string;
}

const kindOf = (track: RemoteTrack): MediaKind => (track.kind === TrackKind.KIND_VIDEO ? 'video' : 'audio');

/** Rejects when `promise` has not settled within `timeoutMs`. */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Joins a room with a token; rejects (ConnectError) when LiveKit refuses the participant. Every
 * remote track is subscribed as it is published, as a viewer's app would.
 */
export async function join(url: string, token: string): Promise<LiveParticipant> {
  const room = new Room();
  const stops: (() => void | Promise<void>)[] = [];
  const tracks: LocalTrack[] = [];
  // Subscriptions nobody waited for yet, so a waiter that starts late still finds its track.
  const unclaimed: Subscription[] = [];
  const waiting: { match: (entry: Subscription) => boolean; resolve: (entry: Subscription) => void }[] = [];
  room.on(RoomEvent.TrackSubscribed, (track, publication, participant) => {
    const entry = { track, publication, identity: participant.identity };
    const index = waiting.findIndex((waiter) => waiter.match(entry));
    if (index >= 0) waiting.splice(index, 1)[0]!.resolve(entry);
    else unclaimed.push(entry);
  });
  // Listened to before connecting, so nothing the server sends at the join is missed.
  const notices: RoomNotice[] = [];
  let leaving = false;
  let removed: (entry: Extract<RoomNotice, { type: 'disconnected' }>) => void;
  const disconnected = new Promise<Extract<RoomNotice, { type: 'disconnected' }>>((resolve) => {
    removed = resolve;
  });
  room.on(RoomEvent.DataReceived, (payload, participant, _kind, topic) => {
    notices.push({
      type: 'data',
      topic,
      payload: new TextDecoder().decode(payload),
      from: participant?.identity,
    });
  });
  room.on(RoomEvent.ParticipantAttributesChanged, (changed, participant) => {
    if (participant.identity === room.localParticipant?.identity)
      notices.push({ type: 'attributes', changed });
  });
  room.on(RoomEvent.Disconnected, (reason) => {
    if (leaving) return;
    const entry = { type: 'disconnected' as const, reason };
    notices.push(entry);
    removed(entry);
  });
  await room.connect(url, token, { autoSubscribe: true, dynacast: false });
  const local = room.localParticipant!;

  async function publish(
    track: LocalVideoTrack | LocalAudioTrack,
    source: TrackSource,
    stop: () => void | Promise<void>,
  ) {
    tracks.push(track);
    stops.push(stop);
    const publication = await local.publishTrack(track, publishOptions(source));
    return publication.sid!;
  }

  const joinedAt = Date.now();
  let leftAt: number | undefined;
  return {
    room,
    identity: local.identity,
    joinedAt,
    get leftAt() {
      return leftAt;
    },

    publishVideo: (width, height) => {
      const source = new VideoSource(width, height);
      // The encoder has nothing to send until the first frame: feed it from the start.
      const stop = startVideoFeed(source, width, height);
      return publish(LocalVideoTrack.createVideoTrack('camera', source), TrackSource.SOURCE_CAMERA, stop);
    },

    publishAudio: () => {
      const source = new AudioSource(SAMPLE_RATE, 1);
      const stop = startAudioFeed(source);
      return publish(
        LocalAudioTrack.createAudioTrack('microphone', source),
        TrackSource.SOURCE_MICROPHONE,
        stop,
      );
    },

    waitForRemoteTrack: (from, kind, timeoutMs = 15_000) => {
      const match = (entry: Subscription) => entry.identity === from && kindOf(entry.track) === kind;
      const earlier = unclaimed.findIndex(match);
      const subscription =
        earlier >= 0
          ? Promise.resolve(unclaimed.splice(earlier, 1)[0]!)
          : new Promise<Subscription>((resolve) => waiting.push({ match, resolve }));
      return withTimeout(
        subscription.then(async ({ track, publication }) => ({
          identity: from,
          kind,
          trackSid: publication.sid!,
          ...(await firstFrame(track, kind)),
        })),
        timeoutMs,
        `${local.identity} waiting for ${from}'s ${kind}`,
      );
    },

    notices,

    waitForDisconnect: (timeoutMs = 15_000) =>
      withTimeout(disconnected, timeoutMs, `${local.identity} waiting to be disconnected by the room`),

    leave: async () => {
      if (leftAt !== undefined) return;
      leftAt = Date.now();
      leaving = true;
      await Promise.all(stops.map((stop) => stop()));
      await Promise.all(tracks.map((track) => track.close()));
      await room.disconnect();
    },
  };
}

/** Why a join failed (the error's message), or null when it succeeded; the session is left at once. */
export async function joinFailure(url: string, token: string): Promise<string | null> {
  try {
    await (await join(url, token)).leave();
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** LiveKit's own room service, to look at what the server holds (participants, permissions, tracks). */
export function roomService(): RoomServiceClient {
  const settings = stackSettings();
  return new RoomServiceClient(
    settings.SVC_LIVEKIT_URL,
    settings.SVC_LIVEKIT_API_KEY,
    settings.SVC_LIVEKIT_API_SECRET,
  );
}

/** Releases the native client's resources; call once, after every participant has left. */
export const disposeLiveKit = dispose;
