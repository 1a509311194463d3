/**
 * Moments (issue 15), through the whole HTTP pipeline of one process on the test stack, each figure
 * with its floor measured in the same run: this machine is shared and noisy, so only ratios compare.
 *
 * 1. Publishing: `videos` real videos made with the ffmpeg CLI (1080×1920 H.264 MP4 of 5-15 s with AAC
 *    sound, one in six a VP9 WebM with Opus; kept in the temporary directory for the next run), each
 *    uploaded once by a user of its own with their token, then published as moments again and again
 *    (POST /v1/me/moments: ffprobe, ffmpeg's thumbnail, the thumbnail's put to MinIO, the priced write)
 *    by two clients at once, two cores' worth. Floor: the thumbnail alone, by the product's own adapter
 *    (control-plane/src/adapters/media-tools.ts, the same arguments: -ss, the scale filter, mjpeg -q:v 4
 *    to pipe:1) on the same objects, read from MinIO through a presigned internal GET URL as the
 *    product does, with the same two in flight. For context, the product's ffprobe alone (the stack's
 *    own, infra/media/build-ffprobe.sh) and Debian's, which it replaced, on the same objects.
 *    The four take turns (four rounds) so that the drift of a shared machine hits them alike, and
 *    each is charged the CPU that went while it ran: this process (node), its children (ffprobe and
 *    ffmpeg), the stack's PostgreSQL, MinIO and Redis, and whatever else the machine did.
 *
 * 2. Lists: GET /v1/moments with the secret key, 20 a page, in a fresh app called with a live key,
 *    holding `moments` moments of `moments / 10` profiles, generated in SQL (INSERT … SELECT FROM
 *    generate_series, in batches): one media row per moment, all pointing at the bytes and thumbnail of
 *    one moment published in part 1; authors skewed as in bench/public-data.ts (a few with thousands,
 *    most with a handful). Measured with `concurrency` in flight, in turns with floor (a) of
 *    bench/core.ts (one INSERT in one transaction, a bare route on the same app and pool) and with the
 *    list's own SQL on a bare route (the moments store on the same pool, no key pipeline): the app's
 *    first pages, its second pages by their cursors, and the same for authors (heavy and light).
 *    Then each again with one call in flight: the latency of a call that does not queue.
 *
 * As bench/public-data.ts, the apps of earlier runs stay in the tables, as other apps would. What this
 * run put in MinIO goes at the end: its moments are deleted through the API (taking their thumbnails),
 * then its uploads, so the loaded media rows are left naming bytes that are gone (nothing reads them).
 *
 *   npm run stack -- up --profile test && npx tsx bench/moments.ts [moments] [concurrency] [calls] [videos] [publishes]
 */
import { execFile } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createMediaTools } from '../control-plane/src/adapters/media-tools.js';
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { statement } from '../control-plane/src/db/transaction.js';
import { MOMENT_VIDEO, THUMBNAIL_SIDE } from '../control-plane/src/modules/media/schema.js';
import { momentsStore } from '../control-plane/src/modules/social/moments-store.js';
import { USER_LIMITS } from '../control-plane/src/modules/social/schema.js';
import { TEST_OBJECT_DAYS } from '../control-plane/src/modules/storage/schema.js';
import { storageKeyOf } from '../control-plane/src/modules/storage/service.js';
import { inTransaction } from '../control-plane/src/platform/transaction.js';
import { mountFloors } from '../control-plane/test/floors.js';
import { createCustomer } from '../control-plane/test/support.js';
import { cpuLine } from './cpu.js';
import {
  type Figures,
  figures,
  injectOk,
  inTurns,
  latencyLine,
  oneAtATime,
  p95Goal,
  secondsSince,
  timed,
  useTestStackSettings,
} from './support.js';

useTestStackSettings();
const moments = Number(process.argv[2] ?? 200_000);
const concurrency = Number(process.argv[3] ?? 16);
const calls = Number(process.argv[4] ?? 3_000);
const videos = Number(process.argv[5] ?? 24);
const publishes = Number(process.argv[6] ?? 96);
const profiles = Math.max(1_000, Math.round(moments / 10));
/** Publishing is limited to two cores' worth: two clients, each waiting for its moment. */
const PUBLISHERS = 2;
/** Rounds in which a path and its floors take turns, so that the machine's drift hits them alike. */
const ROUNDS = 4;

const settings = loadSettings(process.env);
const container = await createContainer(settings);
await container.objects.ensureBucket({ testPrefix: 'test/', testObjectDays: TEST_OBJECT_DAYS });
const owner = await createCustomer(container, {
  mode: 'live',
  plan: 'scale',
  dailyRequestCap: 100_000_000,
  balanceMicros: 1_000_000_000_000,
});
const appId = owner.app.id;
const scope = { appId, mode: 'live' as const };
const secretKey = { authorization: `Bearer ${owner.token}` };
const app = await buildApp(container, { logger: false });
await mountFloors(app, container);
// The list's own SQL, the moments store on the same pool, without the key pipeline.
app.get('/bench/floor/moments', async () => ({
  rows: (await momentsStore(container.pool).list(scope, { limit: 21 })).length,
}));
await app.ready();

const line = (label: string, f: Figures, digits = 0) =>
  `  ${label.padEnd(50)} ${f.perSecond.toFixed(digits).padStart(7)}/s  ${latencyLine(f)}`;

/** A call through the app from an address of its own; anything but a success ends the bench. */
const call = injectOk.bind(null, app);

// ----- 1. publishing ---------------------------------------------------------------------------------

interface Clip {
  name: string;
  type: 'video/mp4' | 'video/webm';
  seconds: number;
}
const CLIP_DIR = join(tmpdir(), 'bench-moments-v1');
const clips: Clip[] = Array.from({ length: videos }, (_, i) => {
  const webm = i % 6 === 5;
  return {
    name: `clip-${i}.${webm ? 'webm' : 'mp4'}`,
    type: webm ? 'video/webm' : 'video/mp4',
    seconds: 5 + ((i * 7) % 11),
  };
});
const ENCODERS = {
  'video/mp4': '-c:v libx264 -preset veryfast -pix_fmt yuv420p -c:a aac -movflags +faststart'.split(' '),
  'video/webm': '-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -row-mt 1 -b:v 4M -c:a libopus'.split(' '),
};

console.log(
  `moments: ${videos} videos, ${publishes} publishes by ${PUBLISHERS} clients; ${moments} moments of ${profiles} profiles,` +
    ` ${calls} calls a list measure, ${concurrency} in flight; node ${process.version}`,
);
const madeStarted = performance.now();
await mkdir(CLIP_DIR, { recursive: true });
const missing = clips.filter((clip) => !existsSync(join(CLIP_DIR, clip.name)));
await timed(missing.length, PUBLISHERS, async () => {
  const clip = missing.pop()!;
  const partial = join(CLIP_DIR, `partial-${clip.name}`);
  await promisify(execFile)('ffmpeg', [
    ...['-v', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc2=size=1080x1920:rate=30'],
    ...['-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000', '-t', String(clip.seconds)],
    ...ENCODERS[clip.type],
    partial,
  ]);
  await rename(partial, join(CLIP_DIR, clip.name));
});
const files = await Promise.all(clips.map((clip) => readFile(join(CLIP_DIR, clip.name))));
const mebibytes = files.reduce((sum, bytes) => sum + bytes.length, 0) / 1024 / 1024;
console.log(
  `  videos in ${CLIP_DIR}: ${clips.filter((clip) => clip.type === 'video/mp4').length} MP4 (H.264, AAC) and` +
    ` ${clips.filter((clip) => clip.type === 'video/webm').length} WebM (VP9, Opus), 1080×1920 at 30 fps,` +
    ` ${Math.min(...clips.map((c) => c.seconds))}-${Math.max(...clips.map((c) => c.seconds))} s,` +
    ` ${mebibytes.toFixed(0)} MiB in all (made or found in ${secondsSince(madeStarted)} s)`,
);

// One user per video, with a profile, who uploads it once through /v1/me/storage.
const uploadStarted = performance.now();
const users = await Promise.all(
  clips.map(async (clip, i) => {
    const userId = `pub-${i}`;
    const minted: { token: string } = (
      await call('POST', `/v1/users/${userId}/tokens`, secretKey, {})
    ).json();
    const token = { authorization: `Bearer ${minted.token}` };
    await call('PUT', '/v1/me/profile', token, { username: `publisher_${i}` });
    const bytes = files[i]!;
    const reserved: { object: { id: string }; upload_url: string } = (
      await call('POST', '/v1/me/storage/uploads', token, {
        name: clip.name,
        content_type: clip.type,
        size_bytes: bytes.length,
      })
    ).json();
    const put = await fetch(reserved.upload_url, {
      method: 'PUT',
      headers: { 'content-type': clip.type, 'if-none-match': '*' },
      body: bytes,
    });
    if (put.status !== 200) throw new Error(`upload failed: ${put.status} ${await put.text()}`);
    await call('POST', `/v1/me/storage/objects/${reserved.object.id}/complete`, token);
    return {
      token,
      objectId: reserved.object.id,
      storageKey: storageKeyOf('live', appId, reserved.object.id),
      clip,
    };
  }),
);
console.log(`  uploaded through /v1/me/storage by ${users.length} users (${secondsSince(uploadStarted)} s)`);

const WARM_UP_PUBLISHES = PUBLISHERS * 2;
const perRound = Math.ceil(publishes / ROUNDS);
const perUser = Math.ceil((WARM_UP_PUBLISHES + perRound * ROUNDS) / videos);
if (perUser > USER_LIMITS.moments.limit)
  throw new Error(`${perUser} moments a user is past the limit of ${USER_LIMITS.moments.limit}: more videos`);

const published: string[] = [];
let publishing = 0;
const publish = async () => {
  const user = users[publishing++ % users.length]!;
  const moment: { id: string; width: number; height: number } = (
    await call('POST', '/v1/me/moments', user.token, { object_id: user.objectId, caption: 'bench' })
  ).json();
  if (moment.width !== 1080 || moment.height !== 1920)
    throw new Error(`moment of ${moment.width}×${moment.height}`);
  published.push(moment.id);
};
const toolsWith = (ffprobe: string) =>
  createMediaTools({ ffprobe, concurrency: PUBLISHERS, timeoutMs: 60_000, queueTimeoutMs: 60_000 });
/** The product's tools: the stack's own small ffprobe, Debian's ffmpeg. */
const tools = toolsWith(settings.SVC_FFPROBE_PATH);
/** Debian's ffprobe, which the product used before it had its own: context only. */
const debianTools = toolsWith('ffprobe');
let thumbnailing = 0;
/** The product's thumbnail of the same object, through a URL presigned the way the product does. */
const thumbnail = async () => {
  const user = users[thumbnailing++ % users.length]!;
  const url = await container.objects.presignInternalGet(user.storageKey, 300);
  const made = await tools.thumbnail(url, MOMENT_VIDEO.demuxers, {
    atSeconds: Math.min(1, user.clip.seconds / 4),
    maxSide: THUMBNAIL_SIDE,
  });
  if (!Buffer.isBuffer(made)) throw new Error(`thumbnail failed: ${made.undecodable}`);
};
const prober = (using: typeof tools) => {
  let probing = 0;
  return async () => {
    const user = users[probing++ % users.length]!;
    const url = await container.objects.presignInternalGet(user.storageKey, 300);
    const read = await using.probe(url, MOMENT_VIDEO.demuxers);
    if (!('format' in read)) throw new Error(`probe failed: ${JSON.stringify(read)}`);
  };
};
const probe = prober(tools);
const debianProbe = prober(debianTools);

console.log(
  `\npublishing, ${PUBLISHERS} in flight, in turns with its floor (${ROUNDS} rounds of ${perRound} each)`,
);
for (const task of [thumbnail, probe, debianProbe, publish]) await timed(WARM_UP_PUBLISHES, PUBLISHERS, task);
const publishRuns = await inTurns(
  {
    thumbnail: () => timed(perRound, PUBLISHERS, thumbnail),
    probe: () => timed(perRound, PUBLISHERS, probe),
    debianProbe: () => timed(perRound, PUBLISHERS, debianProbe),
    pipeline: () => timed(perRound, PUBLISHERS, publish),
  },
  ROUNDS,
);
const pipeline = figures(publishRuns.pipeline.runs);
const floor = figures(publishRuns.thumbnail.runs);
const measuredCount = perRound * ROUNDS;
console.log(line('POST /v1/me/moments (probe, thumbnail, put, write)', pipeline, 2));
console.log(cpuLine(publishRuns.pipeline.cpu, measuredCount));
console.log(line('  its floor: the ffmpeg thumbnail alone', floor, 2));
console.log(cpuLine(publishRuns.thumbnail.cpu, measuredCount));
console.log(line('  context: its ffprobe alone (the stack’s own)', figures(publishRuns.probe.runs), 2));
console.log(cpuLine(publishRuns.probe.cpu, measuredCount));
console.log(line('  context: Debian’s ffprobe alone', figures(publishRuns.debianProbe.runs), 2));
console.log(cpuLine(publishRuns.debianProbe.cpu, measuredCount));
const publishRatio = pipeline.perSecond / floor.perSecond;
console.log(
  `    ratio ${publishRatio.toFixed(2)}× the floor's throughput (≥ 0.8 wanted: ${publishRatio >= 0.8 ? 'met' : 'NOT met'});` +
    ` p50 ${(pipeline.p50 / floor.p50).toFixed(2)}× the floor's`,
);

// ----- 2. lists at scale -------------------------------------------------------------------------

/** Rows per statement: one transaction each, so that the load prints its progress. */
const BATCH = 200_000;

/** Statements of the load, in a transaction of their own, past the pool's timeout (set for API calls). */
const unbounded = (...queries: ReturnType<typeof statement>[]) =>
  inTransaction(container.pool, async (tx) => {
    await tx.query(statement`set local statement_timeout = 0`);
    for (const query of queries) await tx.query(query);
  });

async function load(
  label: string,
  total: number,
  insert: (from: number, to: number) => ReturnType<typeof statement>[],
) {
  const started = performance.now();
  for (let from = 1; from <= total; from += BATCH) {
    const to = Math.min(total, from + BATCH - 1);
    await unbounded(...insert(from, to));
    console.log(`  ${label}: ${to} of ${total} (${secondsSince(started)} s)`);
  }
}

// Every loaded medium names the bytes and the thumbnail of one moment published above.
const real: {
  storage_key: string;
  thumbnail_key: string;
  content_type: string;
  size_bytes: number;
  width: number;
  height: number;
  duration_ms: number;
  thumbnail_bytes: number;
} = await container.pool.one(statement`
  select m.storage_key, m.thumbnail_key, m.content_type, m.size_bytes, m.width, m.height, m.duration_ms,
         m.thumbnail_bytes
  from moments mo join media m on m.id = mo.media_id where mo.id = ${published[0]!}`);
const CAPTIONS = [
  '',
  '',
  'Golden hour 🌅',
  '¡Qué día!',
  'Behind the scenes',
  'First try, no edits',
  'On repeat',
];
const listParameter = (values: readonly string[]) => values.join(',');

console.log(`\nloading into app ${appId} (live)`);
const loadStarted = performance.now();
await load('profiles', profiles, (from, to) => [
  statement`
    insert into profiles (app_id, mode, user_id, username, full_name, category, verified, created_at, updated_at)
    select ${appId}, 'live', 'u' || n, 'user' || n, 'User ' || n, '', i % 100 = 0, at, at
    from (select i, lpad(i::text, 6, '0') as n, now() - interval '1 year' - random() * interval '1 year' as at
          from generate_series(${from}::int, ${to}::int) i) numbered`,
]);
// Moments in the order of their times, as a service writes them; authors: the cube of a uniform draw
// piles moments onto the first usernames and leaves a few to each other one (bench/public-data.ts).
// Each moment's medium is written first, in the same transaction, with the same time.
await load('media and moments', moments, (from, to) => {
  const drawn = statement`
    select g, 'med_' || left(md5(${appId} || ':' || g), 20) as media_id,
           'mom_' || left(md5(${appId} || ':' || g), 20) as moment_id,
           now() - (1 - (g - 0.5) / ${moments}) * interval '1 year' as at
    from generate_series(${from}::int, ${to}::int) g`;
  return [
    statement`
      insert into media (id, app_id, account_id, mode, kind, object_id, storage_key, content_type, size_bytes,
                         width, height, duration_ms, thumbnail_key, thumbnail_bytes, created_at)
      select media_id, ${appId}, ${owner.account.id}, 'live', 'video', null, ${real.storage_key},
             ${real.content_type}, ${real.size_bytes}, ${real.width}, ${real.height}, ${real.duration_ms},
             ${real.thumbnail_key}, ${real.thumbnail_bytes}, at
      from (${drawn}) d order by g`,
    statement`
      insert into moments (id, app_id, mode, author_pk, media_id, caption, like_count, comment_count, view_count,
                           created_at)
      select moment_id, ${appId}, 'live', p.pk, media_id,
             (string_to_array(${listParameter(CAPTIONS)}, ','))[1 + floor(random() * ${CAPTIONS.length})::int],
             floor(power(random(), 4) * 500)::int, floor(power(random(), 4) * 40)::int,
             floor(power(random(), 2) * 5000)::int, at
      from (select d.*, 'u' || lpad((1 + floor(${profiles} * power(random(), 3)))::int::text, 6, '0') as author
            from (${drawn}) d) drawn
      join profiles p on p.app_id = ${appId} and p.mode = 'live' and p.user_id = drawn.author
      order by g`,
  ];
});
const vacuumStarted = performance.now();
// VACUUM (ANALYZE) rather than ANALYZE alone: it sets the visibility map, as autovacuum soon would, so
// that autovacuum does not start on the new rows in the middle of the measures.
await container.pool.connect(async (connection) => {
  await connection.query(statement`set statement_timeout = 0`);
  await connection.query(statement`vacuum (analyze) profiles, media, moments`);
  await connection.query(statement`reset statement_timeout`);
});
console.log(`  vacuum and analyze (${secondsSince(vacuumStarted)} s)`);
const counts: { profiles: number; moments: number; all_media: number; all_moments: number } =
  await container.pool.one(statement`
    select (select count(*) from profiles where app_id = ${appId}) as profiles,
           (select count(*) from moments where app_id = ${appId}) as moments,
           (select count(*) from media) as all_media,
           (select count(*) from moments) as all_moments`);
const authors: { username: string; moments: number }[] = [
  ...(await container.pool.any(statement`
    select a.username, count(*)::int as moments from moments mo join profiles a on a.pk = mo.author_pk
    where mo.app_id = ${appId} and mo.mode = 'live' and mo.deleted_at is null
    group by a.username order by count(*) desc`)),
];
const heavy = authors.slice(0, 20).map((author) => author.username);
const light: readonly string[] = await container.pool.anyFirst(statement`
  select username from profiles where app_id = ${appId} and mode = 'live' and user_id like 'u%'
  order by random() limit 1000`);
console.log(
  `loaded in ${secondsSince(loadStarted)} s: the app holds ${counts.profiles} profiles and ${counts.moments} moments` +
    ` (${authors.filter((author) => author.moments >= 1000).length} authors with 1000 or more, the most` +
    ` ${authors[0]?.moments}, the median ${authors[Math.floor(authors.length / 2)]?.moments} of the` +
    ` ${authors.length} with any); the tables hold ${counts.all_media} media and ${counts.all_moments} moments`,
);

// Long enough for the JIT (as bench/public-data.ts): a server that lists has long been warm.
const WARM_UP = 2_000;
const measure = (count: number, request: () => Promise<unknown>) => timed(count, concurrency, request);
const pickOne = <T>(list: readonly T[]) => list[randomInt(list.length)]!;

type Page = { items: unknown[]; next_cursor: string | null };
const appCursors: string[] = [];
const authorCursors: { author: string; cursor: string }[] = [];
let listed = 0;
let paged = 0;
let authorPaged = 0;
const lists = {
  'GET /v1/moments, first page': async () => {
    const page: Page = (await call('GET', '/v1/moments?limit=20', secretKey)).json();
    if (page.items.length !== 20) throw new Error(`a first page of ${page.items.length}`);
    if (page.next_cursor && appCursors.length < 1_000) appCursors.push(page.next_cursor);
  },
  'GET /v1/moments&cursor, second page': () =>
    call('GET', `/v1/moments?limit=20&cursor=${appCursors[paged++ % appCursors.length]}`, secretKey),
  'GET /v1/moments?author, first page (heavy, light)': async () => {
    const author = pickOne(listed++ % 2 === 0 ? heavy : light);
    const page: Page = (await call('GET', `/v1/moments?author=${author}&limit=20`, secretKey)).json();
    if (page.next_cursor && authorCursors.length < 10_000)
      authorCursors.push({ author, cursor: page.next_cursor });
  },
  'GET /v1/moments?author&cursor, second page': () => {
    const { author, cursor } = authorCursors[authorPaged++ % authorCursors.length]!;
    return call('GET', `/v1/moments?author=${author}&limit=20&cursor=${cursor}`, secretKey);
  },
};
const floors = {
  'floor (a) one INSERT in one transaction': () => call('POST', '/bench/floor/insert', {}),
  'floor: the list’s SQL alone (bare route)': () => call('GET', '/bench/floor/moments', {}),
};

console.log(
  `\nlists, ${concurrency} in flight, in turns with the floors (${ROUNDS} rounds; ${WARM_UP} calls of warm-up each)`,
);
const all = { ...floors, ...lists };
for (const task of Object.values(all)) await measure(WARM_UP, task);
const listsPerRound = Math.ceil(calls / ROUNDS);
const taken = await inTurns(
  Object.fromEntries(Object.entries(all).map(([label, task]) => [label, () => measure(listsPerRound, task)])),
  ROUNDS,
);
const floorA = figures(taken['floor (a) one INSERT in one transaction']!.runs);
for (const [label, { runs, cpu }] of Object.entries(taken)) {
  const f = figures(runs);
  console.log(line(label, f));
  console.log(cpuLine(cpu, listsPerRound * ROUNDS, 2));
  if (label in lists) {
    console.log(
      `${p95Goal(f, 10)}; ${(f.perSecond / floorA.perSecond).toFixed(2)}× (a) throughput, p95 ${(f.p95 / floorA.p95).toFixed(2)}× its`,
    );
  }
}

// The same calls one at a time: their latency without a queue.
const alone = Math.ceil(calls / 3);
console.log(`\none call in flight (${alone} calls each)`);
for (const [label, f] of await oneAtATime(alone, Object.entries(all))) {
  console.log(line(label, f));
  if (label in lists) console.log(p95Goal(f, 10));
}

// ----- clean-up: the bytes this run put in MinIO ---------------------------------------------------

const cleanStarted = performance.now();
await timed(published.length, 4, () => call('DELETE', `/v1/moments/${published.pop()}`, secretKey));
for (const user of users) await call('DELETE', `/v1/storage/objects/${user.objectId}`, secretKey);
console.log(`\nremoved this run's moments, thumbnails and uploads (${secondsSince(cleanStarted)} s)`);

await app.close();
await container.close();
