/**
 * Real media for tests, made with the real ffmpeg (lavfi test sources), and the way a client uploads
 * them: reserve, PUT to MinIO through the signed URL, complete.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import type { App } from '../src/app.js';
import { uniqueAddress } from './support.js';

const run = promisify(execFile);

/** A file ffmpeg makes from `args` (its output is the last argument, a name with the right extension). */
export async function ffmpegFile(name: string, args: string[]): Promise<Buffer> {
  const dir = await mkdtemp(join(tmpdir(), 'media-'));
  try {
    await run('ffmpeg', ['-v', 'error', '-y', ...args, join(dir, name)]);
    return await readFile(join(dir, name));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A test picture with sound, `seconds` long: MP4 (H.264, AAC) or WebM (VP9, Opus). */
export const video = (
  container: 'mp4' | 'webm',
  size: string,
  seconds: number,
  extra: string[] = [],
): Promise<Buffer> =>
  ffmpegFile(`clip.${container}`, [
    '-f',
    'lavfi',
    '-i',
    `testsrc2=size=${size}:rate=${seconds > 60 ? 1 : 25}`,
    '-f',
    'lavfi',
    '-i',
    'sine=frequency=440',
    '-t',
    String(seconds),
    ...(container === 'mp4'
      ? [
          '-c:v',
          'libx264',
          '-preset',
          'ultrafast',
          '-pix_fmt',
          'yuv420p',
          '-c:a',
          'aac',
          '-movflags',
          '+faststart',
        ]
      : ['-c:v', 'libvpx-vp9', '-deadline', 'realtime', '-cpu-used', '8', '-c:a', 'libopus']),
    ...extra,
  ]);

/** The same video, marked to be shown turned a quarter (as phones store portrait video). */
export async function sideways(bytes: Buffer): Promise<Buffer> {
  const dir = await mkdtemp(join(tmpdir(), 'media-'));
  try {
    await writeFile(join(dir, 'in.mp4'), bytes);
    return await ffmpegFile('turned.mp4', [
      '-i',
      join(dir, 'in.mp4'),
      '-c',
      'copy',
      '-metadata:s:v',
      'rotate=90',
    ]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export const photo = (size: string, extension: 'png' | 'jpg' | 'webp' = 'png') =>
  ffmpegFile(`photo.${extension}`, ['-f', 'lavfi', '-i', `testsrc2=size=${size}`, '-frames:v', '1']);

/** What ffprobe reads of bytes (a thumbnail): its codec and size. */
export async function probeBytes(
  bytes: Buffer,
): Promise<{ codec_name: string; width: number; height: number }> {
  const dir = await mkdtemp(join(tmpdir(), 'probe-'));
  try {
    await writeFile(join(dir, 'file'), bytes);
    const { stdout } = await run('ffprobe', [
      '-v',
      'error',
      '-show_entries',
      'stream=codec_name,width,height',
      '-of',
      'json',
      join(dir, 'file'),
    ]);
    return JSON.parse(stdout).streams[0];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Uploads bytes as a client does, with a secret key (`/v1/storage/...`) or a user token
 * (`/v1/me/storage/...`), and completes the object: its id.
 */
export async function upload(
  app: App,
  credential: { kind: 'key' | 'user'; token: string },
  bytes: Buffer | string,
  contentType: string,
  name = 'upload.bin',
): Promise<string> {
  const prefix = credential.kind === 'user' ? '/v1/me/storage' : '/v1/storage';
  const size = Buffer.byteLength(bytes);
  const call = (url: string, payload?: object) =>
    app.inject({
      method: 'POST',
      url,
      headers: { authorization: `Bearer ${credential.token}` },
      remoteAddress: uniqueAddress(),
      ...(payload ? { payload } : {}),
    });
  const reserved = await call(`${prefix}/uploads`, { name, content_type: contentType, size_bytes: size });
  expect(reserved.statusCode, reserved.body).toBe(201);
  const { object, upload_url, upload_headers } = reserved.json();
  const put = await fetch(upload_url, {
    method: 'PUT',
    headers: { 'content-type': contentType, 'if-none-match': upload_headers['If-None-Match'] },
    body: bytes,
  });
  expect(put.status).toBe(200);
  const completed = await call(
    `/v1/${credential.kind === 'user' ? 'me/' : ''}storage/objects/${object.id}/complete`,
  );
  if (completed.statusCode !== 200) throw Object.assign(new Error(completed.body), { reply: completed });
  return object.id;
}
