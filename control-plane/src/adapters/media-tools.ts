import { spawn } from 'node:child_process';
import { UpstreamError } from '../platform/errors.js';

/** What ffprobe read from a file: its container (demuxer) and its streams. */
export interface MediaProbe {
  /** ffmpeg's demuxer names, e.g. `mov,mp4,m4a,3gp,3g2,mj2`, `matroska,webm`, `png_pipe`. */
  format: string;
  /** Seconds, when the container states it. */
  duration: number | null;
  streams: {
    type: string;
    codec: string;
    width?: number;
    height?: number;
    /** Degrees the picture is turned when shown (phones record upright video sideways). */
    rotation?: number;
  }[];
}

export interface MediaToolsOptions {
  ffprobe?: string;
  ffmpeg?: string;
  /** Processes run at once: one per core, so a burst of publishes queues rather than thrashes. */
  concurrency: number;
  /** A process is killed after this long (a stalled read, a pathological file): a 503. */
  timeoutMs: number;
  /** A call waiting this long for a free slot is turned away (503): the replica is saturated. */
  queueTimeoutMs: number;
}

/** What a tool may read: files over HTTP from MinIO only, never a local file or another protocol. */
const PROTOCOLS = 'http,https,tcp,tls';
/** Thumbnails are small; anything bigger is not what was asked for. */
const MAX_OUTPUT_BYTES = 8 * 1024 * 1024;

interface Run {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** What ffmpeg says when the file could not be fetched, rather than not understood. */
const FETCH_FAILED =
  /Server returned|Connection refused|Connection timed out|Failed to resolve|I\/O error|Operation timed out/;
const NOT_FOUND = /Server returned 404/;

/** ffprobe's JSON, the parts asked for. */
interface ProbeJson {
  format?: { format_name?: string; duration?: string };
  streams?: {
    codec_type?: string;
    codec_name?: string;
    width?: number;
    height?: number;
    side_data_list?: { rotation?: number }[];
  }[];
}

/**
 * ffprobe and ffmpeg, run as child processes on files MinIO serves over HTTP (signed URLs): they read
 * only the bytes they need. Inputs are limited to the demuxers the caller allows, so a file cannot
 * make a tool open a playlist, another URL or a local file.
 */
export function createMediaTools(options: MediaToolsOptions) {
  const ffprobe = options.ffprobe ?? 'ffprobe';
  const ffmpeg = options.ffmpeg ?? 'ffmpeg';
  let running = 0;
  const waiting: (() => void)[] = [];

  async function slot<T>(work: () => Promise<T>): Promise<T> {
    if (running >= options.concurrency) {
      await new Promise<void>((resolve, reject) => {
        const turn = () => {
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(() => {
          waiting.splice(waiting.indexOf(turn), 1);
          reject(new UpstreamError('ffmpeg', `no free slot within ${options.queueTimeoutMs} ms`));
        }, options.queueTimeoutMs);
        waiting.push(turn);
      });
    } else running++;
    try {
      return await work();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  }

  const run = (command: string, args: string[]) =>
    slot(
      () =>
        new Promise<Run>((resolve, reject) => {
          const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
          const chunks: Buffer[] = [];
          let size = 0;
          let stderr = '';
          let timedOut = false;
          const timer = setTimeout(() => {
            timedOut = true;
            child.kill('SIGKILL');
          }, options.timeoutMs);
          child.stdout.on('data', (chunk: Buffer) => {
            size += chunk.length;
            if (size > MAX_OUTPUT_BYTES) child.kill('SIGKILL');
            else chunks.push(chunk);
          });
          child.stderr.on('data', (chunk: Buffer) => {
            if (stderr.length < 4_096) stderr += chunk.toString('utf8');
          });
          child.on('error', (error) => {
            clearTimeout(timer);
            reject(
              new UpstreamError(command, `${command} could not run (${error.message}): is ffmpeg installed?`),
            );
          });
          child.on('close', (code) => {
            clearTimeout(timer);
            if (timedOut) reject(new UpstreamError('ffmpeg', `${command} ran over ${options.timeoutMs} ms`));
            else resolve({ code, stdout: Buffer.concat(chunks), stderr: stderr.trim() });
          });
        }),
    );

  const inputOptions = (formats: readonly string[]) => [
    '-protocol_whitelist',
    PROTOCOLS,
    '-format_whitelist',
    formats.join(','),
  ];

  return {
    /**
     * The container and streams of the file at `url`; `unreadable` when none of `formats` reads it
     * (not a media file, or not of the kinds allowed), `missing` when its URL answers 404. A file that
     * could not be fetched (storage away) is a 503, never blamed on the file.
     */
    async probe(
      url: string,
      formats: readonly string[],
    ): Promise<MediaProbe | { unreadable: true } | { missing: true }> {
      const result = await run(ffprobe, [
        '-v',
        'error',
        ...inputOptions(formats),
        '-show_entries',
        'format=format_name,duration:stream=codec_type,codec_name,width,height:stream_side_data=rotation',
        '-of',
        'json',
        url,
      ]);
      if (result.code !== 0) {
        // ffmpeg's messages quote the signed URL: they go to the log, never to the caller.
        if (NOT_FOUND.test(result.stderr)) return { missing: true };
        if (FETCH_FAILED.test(result.stderr)) throw new UpstreamError('MinIO', `ffprobe: ${result.stderr}`);
        return { unreadable: true };
      }
      const parsed = JSON.parse(result.stdout.toString('utf8')) as ProbeJson;
      const duration = Number(parsed.format?.duration);
      return {
        format: parsed.format?.format_name ?? '',
        duration: Number.isFinite(duration) && duration > 0 ? duration : null,
        streams: (parsed.streams ?? []).map((stream) => {
          const rotation = stream.side_data_list?.find((side) => side.rotation !== undefined)?.rotation;
          return {
            type: stream.codec_type ?? '',
            codec: stream.codec_name ?? '',
            ...(stream.width ? { width: stream.width } : {}),
            ...(stream.height ? { height: stream.height } : {}),
            ...(rotation ? { rotation } : {}),
          };
        }),
      };
    },

    /**
     * A JPEG of the frame at `atSeconds`, upright, at most `maxSide` pixels on its longer side (never
     * enlarged).
     */
    async thumbnail(
      url: string,
      formats: readonly string[],
      frame: { atSeconds: number; maxSide: number },
    ): Promise<Buffer | { undecodable: true }> {
      const side = frame.maxSide;
      const result = await run(ffmpeg, [
        '-v',
        'error',
        ...inputOptions(formats),
        '-ss',
        frame.atSeconds.toFixed(3),
        '-i',
        url,
        '-frames:v',
        '1',
        '-vf',
        `scale='if(gte(iw,ih),min(${side},iw),-2)':'if(gte(iw,ih),-2,min(${side},ih))'`,
        '-f',
        'image2pipe',
        '-c:v',
        'mjpeg',
        '-q:v',
        '4',
        'pipe:1',
      ]);
      if (result.code !== 0 && FETCH_FAILED.test(result.stderr)) {
        throw new UpstreamError('MinIO', `ffmpeg: ${result.stderr}`);
      }
      // A file ffprobe read but no frame of which decodes.
      if (result.code !== 0 || result.stdout.length === 0) return { undecodable: true as const };
      return result.stdout;
    },

    /** Runs ffmpeg with these arguments (rendering the sandbox's clips); throws with its reason. */
    async render(args: string[]): Promise<void> {
      const result = await run(ffmpeg, ['-v', 'error', '-y', ...args]);
      if (result.code !== 0) throw new UpstreamError('ffmpeg', `ffmpeg failed: ${result.stderr}`);
    },

    /** Both tools' versions; a clear error when either is missing, for the start-up check. */
    async versions(): Promise<{ ffprobe: string; ffmpeg: string }> {
      const [probe, mpeg] = await Promise.all([run(ffprobe, ['-version']), run(ffmpeg, ['-version'])]);
      if (probe.code !== 0 || mpeg.code !== 0)
        throw new UpstreamError('ffmpeg', 'ffprobe or ffmpeg failed to start');
      const first = (output: Run) => output.stdout.toString('utf8').split('\n')[0] ?? '';
      return { ffprobe: first(probe), ffmpeg: first(mpeg) };
    },
  };
}

export type MediaTools = ReturnType<typeof createMediaTools>;
