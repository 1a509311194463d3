import { Type } from '@sinclair/typebox';
import { z } from 'zod';

/** What a kind of media accepts: containers (ffmpeg's demuxers), codecs and sizes. */
export interface MediaRules {
  kind: 'video' | 'photo';
  /** The containers accepted, as a refusal names them. */
  containers: string;
  /** The demuxers ffprobe and ffmpeg may use on such a file (their names, as ffmpeg spells them). */
  demuxers: readonly string[];
  /** Video codecs a browser plays (the picture of a photo is a one-frame video stream). */
  codecs: readonly string[];
  /** Audio codecs a browser plays; a video may also have no sound. */
  audioCodecs: readonly string[];
  /** The longest video, in seconds. */
  maxSeconds?: number;
  /** The longest side, in pixels, as shown (turned upright). */
  maxSide: number;
}

/**
 * The spec's storage video types (MP4, QuickTime, WebM, Matroska) with the codecs browsers play:
 * H.264, HEVC, VP8, VP9 and AV1 pictures; AAC, MP3, Opus, Vorbis or FLAC sound, or none.
 */
const VIDEO = {
  kind: 'video',
  containers: 'MP4, QuickTime, WebM or Matroska',
  demuxers: ['mov', 'mp4', 'm4a', '3gp', '3g2', 'mj2', 'matroska', 'webm'],
  codecs: ['h264', 'hevc', 'vp8', 'vp9', 'av1'],
  audioCodecs: ['aac', 'mp3', 'opus', 'vorbis', 'flac'],
  maxSide: 4_096,
} as const;

/** A moment is a short video: at most three minutes, at most 4K. */
export const MOMENT_VIDEO: MediaRules = { ...VIDEO, maxSeconds: 180 };
/** A studio video: at most ten minutes, at most 4K. */
export const STUDIO_VIDEO: MediaRules = { ...VIDEO, maxSeconds: 600 };
/** A studio photo: PNG, JPEG, WebP or GIF, at most 8,192 pixels a side. */
export const STUDIO_PHOTO: MediaRules = {
  kind: 'photo',
  containers: 'PNG, JPEG, WebP or GIF',
  demuxers: ['png_pipe', 'jpeg_pipe', 'webp_pipe', 'gif'],
  codecs: ['png', 'mjpeg', 'webp', 'gif'],
  audioCodecs: [],
  maxSide: 8_192,
};

/** The longer side of a thumbnail, in pixels. */
export const THUMBNAIL_SIDE = 640;
/** Browsers and caches may keep media this long: a deleted moment's URLs stop within a minute. */
export const MEDIA_MAX_AGE_SECONDS = 30;
/** Where the control plane keeps the thumbnails it makes, apart from storage's own keys. */
export const MEDIA_PREFIX = 'media/';

/** Media made from an object, checked and with its thumbnail stored, not yet recorded. */
export interface MediaDraft {
  id: string;
  kind: 'video' | 'photo';
  objectId: string;
  storageKey: string;
  contentType: string;
  sizeBytes: number;
  width: number;
  height: number;
  durationMs: number | null;
  thumbnailKey: string;
  thumbnailBytes: number;
}

export const MediaParams = Type.Object(
  { id: Type.String({ pattern: '^med_[A-Za-z0-9_]{1,80}$', description: 'The media id' }) },
  { additionalProperties: false },
);

/** The bytes of a video, a photo or a thumbnail (any Range of them). */
export const MediaBytes = Type.Unsafe<NodeJS.ReadableStream>({
  type: 'string',
  format: 'binary',
  description: 'The bytes, or the requested range of them (206)',
});

export const MediaRow = z.object({
  id: z.string(),
  app_id: z.string(),
  account_id: z.string(),
  mode: z.enum(['live', 'test']),
  kind: z.enum(['video', 'photo']),
  storage_key: z.string(),
  content_type: z.string(),
  size_bytes: z.number(),
  width: z.number(),
  height: z.number(),
  thumbnail_key: z.string(),
  thumbnail_bytes: z.number(),
});
export type MediaRow = z.infer<typeof MediaRow>;
