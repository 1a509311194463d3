import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'slonik';
import type { MediaTools } from '../../adapters/media-tools.js';
import type { ObjectStore } from '../../adapters/s3.js';
import type { Db } from '../../platform/transaction.js';
import { THUMBNAIL_SIDE } from './schema.js';

/**
 * The sandbox's clips: short videos ffmpeg renders from its own test sources the first time a
 * sandbox is seeded (nothing binary is committed), kept once in the bucket for every test app.
 */
export const SANDBOX_CLIPS = [
  { name: 'bars', source: 'smptehdbars=size=640x360:rate=25', width: 640, height: 360, container: 'mp4' },
  { name: 'pattern', source: 'testsrc2=size=360x640:rate=25', width: 360, height: 640, container: 'mp4' },
  { name: 'fractal', source: 'mandelbrot=size=360x640:rate=25', width: 360, height: 640, container: 'webm' },
  { name: 'colours', source: 'rgbtestsrc=size=480x480:rate=25', width: 480, height: 480, container: 'mp4' },
  {
    name: 'life',
    source: 'life=size=360x640:rate=15:mold=10:ratio=0.4',
    width: 360,
    height: 640,
    container: 'webm',
  },
  { name: 'cells', source: 'cellauto=size=640x360:rate=25', width: 640, height: 360, container: 'mp4' },
] as const;

const SECONDS = 3;
/** Bump to render the clips again (another look, another codec): the keys change with it. */
const PREFIX = 'sandbox/clips-v1/';

const ENCODERS = {
  mp4: ['-c:v', 'libx264', '-preset', 'veryfast', '-pix_fmt', 'yuv420p', '-movflags', '+faststart'],
  webm: ['-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8', '-b:v', '400k'],
} as const;

type Clip = (typeof SANDBOX_CLIPS)[number];

interface Rendered {
  clip: Clip;
  key: string;
  thumbnailKey: string;
  size: number;
  thumbnailBytes: number;
}

/** The sandbox's clips, rendered once, and media rows of a test app showing them. */
export interface SandboxClips {
  /** Renders the clips missing from the bucket (once per process; again after a failure). */
  prepare(): Promise<void>;
  /**
   * Records media showing clips, one row each (so deleting what shows one medium leaves the others);
   * the clips' bytes and thumbnails are shared by every test app and never removed with a medium.
   */
  seed(tx: Db, appId: string, at: Date, uses: readonly { id: string; clip: ClipName }[]): Promise<void>;
}

export type ClipName = Clip['name'];

export function sandboxClips(deps: { objects: ObjectStore; tools: MediaTools }): SandboxClips {
  let rendering: Promise<Map<string, Rendered>> | undefined;

  async function render(clip: Clip): Promise<Rendered> {
    const key = `${PREFIX}${clip.name}.${clip.container}`;
    const thumbnailKey = `${PREFIX}${clip.name}.jpg`;
    const [size, thumbnailBytes] = await Promise.all([
      deps.objects.sizeOf(key),
      deps.objects.sizeOf(thumbnailKey),
    ]);
    if (size !== null && thumbnailBytes !== null) return { clip, key, thumbnailKey, size, thumbnailBytes };
    const dir = await mkdtemp(join(tmpdir(), 'sandbox-clip-'));
    try {
      const video = join(dir, `clip.${clip.container}`);
      const thumbnail = join(dir, 'thumbnail.jpg');
      await deps.tools.render([
        '-f',
        'lavfi',
        '-i',
        clip.source,
        '-t',
        String(SECONDS),
        ...ENCODERS[clip.container],
        video,
      ]);
      await deps.tools.render([
        '-ss',
        '1',
        '-i',
        video,
        '-frames:v',
        '1',
        '-vf',
        `scale=-2:'min(${THUMBNAIL_SIDE},ih)'`,
        '-q:v',
        '4',
        thumbnail,
      ]);
      const [videoBytes, thumbnailFile] = await Promise.all([readFile(video), readFile(thumbnail)]);
      // The thumbnail last: its presence says the clip is complete.
      await deps.objects.put(key, videoBytes, `video/${clip.container}`);
      await deps.objects.put(thumbnailKey, thumbnailFile, 'image/jpeg');
      return { clip, key, thumbnailKey, size: videoBytes.length, thumbnailBytes: thumbnailFile.length };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  const rendered = () => {
    rendering ??= Promise.all(SANDBOX_CLIPS.map(render)).then(
      (clips) => new Map(clips.map((clip) => [clip.clip.name, clip])),
      (error: unknown) => {
        rendering = undefined;
        throw error;
      },
    );
    return rendering;
  };

  return {
    prepare: async () => {
      await rendered();
    },
    seed: async (tx, appId, at, uses) => {
      const clips = await rendered();
      await tx.query(sql.unsafe`
        insert into media (id, app_id, account_id, mode, kind, storage_key, content_type, size_bytes, width, height,
                           duration_ms, thumbnail_key, thumbnail_bytes, created_at)
        select c.id, ${appId}, apps.account_id, 'test', 'video', c.storage_key, c.content_type, c.size_bytes, c.width,
               c.height, ${SECONDS * 1000}, c.thumbnail_key, c.thumbnail_bytes, ${sql.timestamp(at)}
        from ${sql.unnest(
          uses.map((use) => {
            const clip = clips.get(use.clip)!;
            return [
              use.id,
              clip.key,
              `video/${clip.clip.container}`,
              clip.size,
              clip.clip.width,
              clip.clip.height,
              clip.thumbnailKey,
              clip.thumbnailBytes,
            ];
          }),
          ['text', 'text', 'text', 'int8', 'int4', 'int4', 'text', 'int4'],
        )} as c (id, storage_key, content_type, size_bytes, width, height, thumbnail_key, thumbnail_bytes)
        join apps on apps.id = ${appId}`);
    },
  };
}
