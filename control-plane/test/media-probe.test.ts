/**
 * The stacks check uploads with an ffprobe of their own (infra/media/build-ffprobe.sh: FFmpeg's, built
 * with only the accepted demuxers and decoders). It must read every file exactly as Debian's full
 * ffprobe does, accepted or not: the same container, duration, streams, sizes and rotation, the same
 * refusals. Both read the same real files (made with Debian's ffmpeg) over HTTP with Range requests,
 * as they read MinIO's signed URLs.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMediaTools } from '../src/adapters/media-tools.js';
import { MOMENT_VIDEO, STUDIO_PHOTO } from '../src/modules/media/schema.js';
import { ffmpegFile, photo, sideways, video } from './media-files.js';
import { testSettings } from './support.js';

const tools = (ffprobe: string) =>
  createMediaTools({ ffprobe, concurrency: 2, timeoutMs: 20_000, queueTimeoutMs: 20_000 });
const ours = tools(testSettings().SVC_FFPROBE_PATH);
const debians = tools('ffprobe');

/** A second of picture and sound in the file `name`, encoded with these arguments. */
const clip = (name: string, args: string[]) =>
  ffmpegFile(name, [
    '-f',
    'lavfi',
    '-i',
    'testsrc2=size=320x240:rate=25',
    '-f',
    'lavfi',
    '-i',
    'sine=frequency=440',
    '-t',
    '1',
    ...args,
  ]);

const files = new Map<string, Buffer>();
let server: Server;
let base: string;

beforeAll(async () => {
  const made = await Promise.all([
    ['mp4 (H.264, AAC)', video('mp4', '640x360', 2)],
    ['webm (VP9, Opus)', video('webm', '360x640', 2)],
    ['mp4 marked sideways', video('mp4', '640x360', 1).then(sideways)],
    [
      'mp4 with its index at the end',
      clip('tail.mp4', ['-c:v', 'libx264', '-preset', 'ultrafast', '-c:a', 'aac']),
    ],
    [
      'mp4 (HEVC, MP3)',
      clip('hevc.mp4', ['-c:v', 'libx265', '-preset', 'ultrafast', '-tag:v', 'hvc1', '-c:a', 'libmp3lame']),
    ],
    [
      'mp4 (AV1), which only Debian’s can decode',
      clip('av1.mp4', ['-c:v', 'libaom-av1', '-cpu-used', '8', '-an']),
    ],
    [
      'webm (VP8, Vorbis)',
      clip('vp8.webm', ['-c:v', 'libvpx', '-deadline', 'realtime', '-c:a', 'libvorbis']),
    ],
    ['webm (AV1, Opus)', clip('av1.webm', ['-c:v', 'libaom-av1', '-cpu-used', '8', '-c:a', 'libopus'])],
    // As a browser's MediaRecorder writes it: no duration, no cues.
    [
      'webm written live',
      clip('live.webm', ['-c:v', 'libvpx', '-deadline', 'realtime', '-c:a', 'libopus', '-live', '1']),
    ],
    ['mov (H.264, AAC)', clip('clip.mov', ['-c:v', 'libx264', '-preset', 'ultrafast', '-c:a', 'aac'])],
    ['mkv (H.264, FLAC)', clip('flac.mkv', ['-c:v', 'libx264', '-preset', 'ultrafast', '-c:a', 'flac'])],
    ['mp4 of a refused codec (MPEG-4 part 2)', clip('mpeg4.mp4', ['-c:v', 'mpeg4', '-c:a', 'aac'])],
    ['png', photo('320x240', 'png')],
    ['jpeg', photo('320x240', 'jpg')],
    ['webp', photo('320x240', 'webp')],
    [
      'animated png',
      ffmpegFile('anim.png', [
        '-f',
        'lavfi',
        '-i',
        'testsrc2=size=64x48:rate=5',
        '-t',
        '0.6',
        '-plays',
        '0',
        '-f',
        'apng',
      ]),
    ],
    ['gif', ffmpegFile('photo.gif', ['-f', 'lavfi', '-i', 'testsrc2=size=320x240', '-frames:v', '1'])],
    ['text', Promise.resolve(Buffer.from('not a video at all\n'.repeat(100)))],
  ] as const);
  for (const [name, bytes] of made) files.set(name, await bytes);
  server = createServer((request, response) => {
    const bytes = files.get(decodeURIComponent(request.url!.slice(1)));
    if (!bytes) return response.writeHead(404).end();
    const range = /^bytes=(\d+)-(\d*)$/.exec(request.headers.range ?? '');
    if (!range) return response.writeHead(200, { 'content-length': bytes.length }).end(bytes);
    const start = Number(range[1]);
    const end = range[2] ? Math.min(Number(range[2]), bytes.length - 1) : bytes.length - 1;
    if (start >= bytes.length)
      return response.writeHead(416, { 'content-range': `bytes */${bytes.length}` }).end();
    response
      .writeHead(206, {
        'content-length': end - start + 1,
        'content-range': `bytes ${start}-${end}/${bytes.length}`,
      })
      .end(bytes.subarray(start, end + 1));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 120_000);
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
});

describe('the stacks’ own ffprobe', () => {
  it('is FFmpeg’s, of the release Debian’s ffmpeg is, and not Debian’s binary', async () => {
    // `ffprobe version 5.1.9 Copyright…` and `ffprobe version 5.1.9-0+deb12u1 Copyright…`: a Debian
    // update to another release fails here until infra/media/build-ffprobe.sh follows it.
    const version = (line: string) => /^ffprobe version (\S+) /.exec(line)?.[1] ?? line;
    const mine = version((await ours.versions()).ffprobe);
    const theirs = version((await debians.versions()).ffprobe);
    expect(mine).toMatch(/^\d+\.\d+\.\d+$/);
    expect(theirs).toMatch(new RegExp(`^${mine.replaceAll('.', '\\.')}-`));
  });

  for (const kind of [MOMENT_VIDEO, STUDIO_PHOTO])
    it(`reads every file as Debian’s ffprobe does, allowed ${kind.demuxers[0]} and the like`, async () => {
      const accepted: string[] = [];
      for (const name of files.keys()) {
        const url = `${base}/${encodeURIComponent(name)}`;
        const [mine, theirs] = await Promise.all([
          ours.probe(url, kind.demuxers),
          debians.probe(url, kind.demuxers),
        ]);
        expect(mine, name).toEqual(theirs);
        if ('format' in mine) accepted.push(name);
      }
      // Each kind reads its own files and refuses the others: the comparison covered both outcomes.
      expect(accepted.length).toBeGreaterThan(0);
      expect(accepted.length).toBeLessThan(files.size);
      expect(await ours.probe(`${base}/missing`, kind.demuxers)).toEqual({ missing: true });
    });
});
