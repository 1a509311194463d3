import { sql } from 'slonik';
import { type SandboxPart, sandboxIds } from '../../platform/sandbox.js';
import type { Transaction } from '../../platform/transaction.js';
import type { SandboxClips } from '../media/sandbox.js';
import type { StudioKind } from './schema.js';

/**
 * The test mode's studio: the same assets in every app, so a developer can build a gallery (both
 * kinds, paging, assets with and without a title, thumbnail or size) before uploading anything.
 * They are URL assets at placeholder hosts (example.com, which never serves them): only their
 * fields matter. Ids are unique across apps (a hash of the app id tells them apart) and never look
 * like newId's; times are relative to the seeding.
 */

type UrlAsset = readonly [
  kind: StudioKind,
  /** The file's name under the placeholder hosts. */
  file: string,
  title: string,
  size: readonly [width: number, height: number] | null,
  /** Whether a thumbnail URL was given (a video's poster, a photo's smaller copy). */
  thumbnail: boolean,
  tags: readonly string[],
  /** Hours before the seeding. */
  age: number,
];

/** Newest first, as the list shows them. */
export const STUDIO_URL_FIXTURES: readonly UrlAsset[] = [
  ['photo', 'harbour-golden-hour', 'Golden hour at the harbour', [4032, 3024], true, ['travel', 'sunset'], 2],
  ['video', 'studio-tour', 'Studio tour', [1920, 1080], true, ['behind the scenes'], 5],
  ['photo', 'sourdough-crumb', 'Sourdough crumb', [3000, 3000], true, ['food', 'bakery'], 9],
  ['photo', 'team-portrait', 'The team', [2400, 3600], false, ['people'], 20],
  ['video', 'product-teaser', 'Spring teaser (15 s)', [1080, 1920], true, ['product', 'vertical'], 30],
  ['photo', 'logo-dark', '', [1024, 1024], false, ['brand'], 48],
  ['photo', 'mountain-trail', 'Trail above the lake', [6000, 4000], true, ['travel', 'outdoors'], 72],
  ['video', 'live-set', 'Live set, Friday night', null, false, ['music', 'live'], 100],
  ['photo', 'cafe-terrace', 'Café en terrasse', [2048, 1365], true, ['food', 'café'], 150],
  ['photo', 'screenshot-dashboard', 'Dashboard, v2', null, false, [], 200],
  ['video', 'how-to-knead', 'How to knead dough', [1280, 720], true, ['food', 'tutorial'], 300],
  ['photo', 'night-market', 'Night market, Taipei', [3840, 2160], true, ['travel', 'night'], 500],
];

const PHOTOS = 'https://images.example.com/sandbox/studio';
const VIDEOS = 'https://videos.example.com/sandbox/studio';

/** Seeds the app's sandbox studio in one statement. */
async function seedStudio(tx: Transaction, appId: string, at: Date): Promise<void> {
  const ids = sandboxIds(appId);
  const id = (index: number) => ids('sta', index + 1, 3);
  const seededAt = sql.timestamp(at);
  // Tags travel as JSON: unnest flattens an array of arrays.
  await tx.query(sql.unsafe`
    insert into studio_assets (id, app_id, mode, kind, url, thumbnail_url, title, width, height, tags, created_at,
                               updated_at)
    select f.id, ${appId}, 'test', f.kind, f.url, f.thumbnail_url, f.title, f.width, f.height,
           array(select jsonb_array_elements_text(f.tags)),
           ${seededAt} - make_interval(hours => f.age), ${seededAt} - make_interval(hours => f.age)
    from ${sql.unnest(
      STUDIO_URL_FIXTURES.map(([kind, file, title, size, thumbnail, tags, age], index) => [
        id(index),
        kind,
        kind === 'video' ? `${VIDEOS}/${file}.mp4` : `${PHOTOS}/${file}.jpg`,
        thumbnail ? `${PHOTOS}/${file}${kind === 'video' ? '-poster' : '-small'}.jpg` : null,
        title,
        size?.[0] ?? null,
        size?.[1] ?? null,
        JSON.stringify(tags),
        age,
      ]),
      ['text', 'text', 'text', 'text', 'text', 'int4', 'int4', 'jsonb', 'int4'],
    )} as f (id, kind, url, thumbnail_url, title, width, height, tags, age)`);
}

/** Studio videos made from the sandbox's clips, as an app's own uploads would be: keyless URLs. */
const CLIP_ASSETS = [
  ['fractal', 'Fractal zoom', ['generative', 'loop'], 2],
  ['bars', 'Colour bars', ['test', 'broadcast'], 1],
] as const;

/** The studio's assets: URL assets, and videos showing the shared sandbox clips (media of their own). */
export const studioSandbox = (clips: SandboxClips): SandboxPart => ({
  name: 'studio',
  prepare: clips.prepare,
  seed: async (tx, appId, at) => {
    await seedStudio(tx, appId, at);
    const ids = sandboxIds(appId);
    const id = (index: number) => ids('sta', `clip${index + 1}`);
    const mediaId = (index: number) => ids('med', `s${index + 1}`);
    await clips.seed(
      tx,
      appId,
      at,
      CLIP_ASSETS.map(([clip], index) => ({ id: mediaId(index), clip })),
    );
    const seededAt = sql.timestamp(at);
    await tx.query(sql.unsafe`
      insert into studio_assets (id, app_id, mode, kind, media_id, title, tags, created_at, updated_at)
      select f.id, ${appId}, 'test', 'video', f.media_id, f.title, array(select jsonb_array_elements_text(f.tags)),
             ${seededAt} - make_interval(hours => f.age), ${seededAt} - make_interval(hours => f.age)
      from ${sql.unnest(
        CLIP_ASSETS.map(([, title, tags, age], index) => [
          id(index),
          mediaId(index),
          title,
          JSON.stringify(tags),
          age,
        ]),
        ['text', 'text', 'text', 'jsonb', 'int4'],
      )} as f (id, media_id, title, tags, age)`);
  },
});
