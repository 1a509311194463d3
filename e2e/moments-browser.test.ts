/**
 * A moment in a real Chromium, against the running stack: a user uploads a video ffmpeg made
 * (H.264 MP4) through the presigned URL and publishes it with their user token; an app's web page on
 * another origin plays its `video_url` in a `<video>` and shows its `thumbnail_url` in an `<img>`,
 * both loaded keyless from the control plane's public URL. The app's server then deletes the moment,
 * and its URLs answer 404.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stackPaths } from '../infra/src/paths.js';
import { useWebApp } from './support/browser.js';
import { api, createCustomer, stackSettings } from './support/stack.js';

/** Where this test keeps what it saw: the test profile's state, next to its logs (git ignores it). */
const ARTIFACTS = join(stackPaths('test').profileDir, 'artifacts');

const PAGE = `<!doctype html><meta charset="utf-8"><title>moment</title>
<style>body { margin: 0; background: #222; } video, img { display: block; margin: 8px; }</style>
<video id="video" muted playsinline></video>
<img id="thumbnail" alt="">
<script>
  // Plays the video until it is past \`seconds\` and shows the thumbnail; what the browser made of both.
  window.show = async (videoUrl, thumbnailUrl, seconds) => {
    const video = document.getElementById('video');
    const img = document.getElementById('thumbnail');
    img.src = thumbnailUrl;
    const decoded = img.decode();
    const played = new Promise((resolve, reject) => {
      video.addEventListener('error', () =>
        reject(new Error('video error ' + video.error.code + ': ' + video.error.message)));
      video.addEventListener('timeupdate', () => {
        if (video.currentTime > seconds) resolve();
      });
      setTimeout(() => reject(new Error('video stuck at ' + video.currentTime + ' s (readyState '
        + video.readyState + ', networkState ' + video.networkState + ')')), 20000);
    });
    video.src = videoUrl;
    await video.play();
    await played;
    video.pause();
    await decoded;
    return {
      currentSrc: video.currentSrc,
      currentTime: video.currentTime,
      duration: video.duration,
      videoWidth: video.videoWidth,
      videoHeight: video.videoHeight,
      thumbnailSrc: img.currentSrc,
      naturalWidth: img.naturalWidth,
      naturalHeight: img.naturalHeight,
    };
  };
</script>`;

interface Moment {
  id: string;
  video_url: string;
  thumbnail_url: string;
  width: number;
  height: number;
  duration_ms: number;
}

interface Upload {
  object: { id: string };
  upload_url: string;
  upload_headers: Record<string, string>;
}

const run = promisify(execFile);

/** Scratch files for ffmpeg and ffprobe, removed after the tests. */
let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'moments-browser-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** A 640×360, 3-second H.264 MP4 (no sound) from ffmpeg's test source, moov first. */
async function makeVideo(): Promise<Buffer> {
  const file = join(scratch, 'clip.mp4');
  await run('ffmpeg', [
    '-v',
    'error',
    '-y',
    '-f',
    'lavfi',
    '-i',
    'testsrc2=size=640x360:rate=25',
    '-t',
    '3',
    '-c:v',
    'libx264',
    '-pix_fmt',
    'yuv420p',
    '-movflags',
    '+faststart',
    file,
  ]);
  return readFile(file);
}

/** What ffprobe reads of an image's bytes: its codec and size (`mjpeg,640,360`). */
async function probeImage(bytes: ArrayBuffer): Promise<{ codec: string; width: number; height: number }> {
  const file = join(scratch, 'image');
  await writeFile(file, new Uint8Array(bytes));
  const entries = ['-show_entries', 'stream=codec_name,width,height', '-of', 'csv=p=0'];
  const { stdout } = await run('ffprobe', ['-v', 'error', ...entries, file]);
  const [codec = '', width, height] = stdout.trim().split(',');
  return { codec, width: Number(width), height: Number(height) };
}

const web = useWebApp({ '/': { type: 'text/html', body: PAGE } });

describe('a moment in the browser', () => {
  it('plays its video and shows its thumbnail from the public URL; both stop once it is deleted', async ({
    annotate,
  }) => {
    const customer = await createCustomer(web.container);
    const tag = Date.now().toString(36);
    const minted = await api<{ token: string }>(customer, 'POST', `/v1/users/moments-${tag}/tokens`, {});
    expect(minted.status).toBe(200);
    const user = { token: minted.body.token };
    const profile = await api(user, 'PUT', '/v1/me/profile', { username: `mom_${tag}` });
    expect(profile.status, JSON.stringify(profile.body)).toBe(200);

    // The user's upload, as their app does it: reserve, PUT the bytes to MinIO, complete.
    const mp4 = await makeVideo();
    const reserved = await api<Upload>(user, 'POST', '/v1/me/storage/uploads', {
      name: 'clip.mp4',
      content_type: 'video/mp4',
      size_bytes: mp4.length,
    });
    expect(reserved.status, JSON.stringify(reserved.body)).toBe(201);
    const put = await fetch(reserved.body.upload_url, {
      method: 'PUT',
      headers: {
        'content-type': reserved.body.upload_headers['Content-Type']!,
        'if-none-match': reserved.body.upload_headers['If-None-Match']!,
      },
      body: new Uint8Array(mp4),
    });
    expect(put.status).toBe(200);
    const objectId = reserved.body.object.id;
    const completed = await api(user, 'POST', `/v1/me/storage/objects/${objectId}/complete`);
    expect(completed.status, JSON.stringify(completed.body)).toBe(200);
    const published = await api<Moment>(user, 'POST', '/v1/me/moments', {
      object_id: objectId,
      caption: 'from the browser test',
    });
    expect(published.status, JSON.stringify(published.body)).toBe(200);
    const moment = published.body;
    expect(moment).toMatchObject({ width: 640, height: 360, duration_ms: 3000 });
    // Built from the control plane's public URL: the page loads them from that origin.
    const origin = new URL(stackSettings().SVC_PUBLIC_URL).origin;
    expect(new URL(moment.video_url).origin).toBe(origin);
    expect(new URL(moment.thumbnail_url).origin).toBe(origin);

    // The JPEG the thumbnail URL serves, as ffprobe measures it.
    const thumbnail = await fetch(moment.thumbnail_url);
    expect(thumbnail.status).toBe(200);
    expect(thumbnail.headers.get('content-type')).toBe('image/jpeg');
    const jpeg = await probeImage(await thumbnail.arrayBuffer());
    expect(jpeg.codec).toBe('mjpeg');

    const context = await web.browser.newContext({ viewport: { width: 680, height: 780 } });
    try {
      const page = await context.newPage();
      await page.goto(web.url);
      expect(new URL(web.url).origin).not.toBe(origin);
      const seen = await page.evaluate(
        ([videoUrl, thumbnailUrl]) =>
          (
            window as unknown as {
              show(videoUrl: string, thumbnailUrl: string, seconds: number): Promise<Record<string, unknown>>;
            }
          ).show(videoUrl, thumbnailUrl, 0.5),
        [moment.video_url, moment.thumbnail_url] as const,
      );
      expect(seen).toEqual({
        currentSrc: moment.video_url,
        currentTime: expect.any(Number),
        duration: expect.closeTo(moment.duration_ms / 1000, 1),
        videoWidth: moment.width,
        videoHeight: moment.height,
        thumbnailSrc: moment.thumbnail_url,
        naturalWidth: jpeg.width,
        naturalHeight: jpeg.height,
      });
      expect(seen.currentTime).toBeGreaterThan(0.5);
      expect(seen.naturalWidth).toBeGreaterThan(0);

      await mkdir(ARTIFACTS, { recursive: true });
      const screenshot = join(ARTIFACTS, 'moments-browser.png');
      await page.screenshot({ path: screenshot, fullPage: true });
      await annotate(`screenshot: ${screenshot}`);
    } finally {
      await context.close();
    }

    // Moderation by the app's server: the moment goes, and so do its URLs (no cache on this fetch).
    const deleted = await api(customer, 'DELETE', `/v1/moments/${moment.id}`);
    expect(deleted).toEqual({ status: 200, body: { ok: true, id: moment.id } });
    for (const url of [moment.video_url, moment.thumbnail_url]) {
      const gone = await fetch(url, { cache: 'no-store' });
      expect(gone.status, url).toBe(404);
    }
    expect((await api(customer, 'GET', `/v1/moments/${moment.id}`)).status).toBe(404);
  });
});
