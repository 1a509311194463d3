import { closeSync, existsSync, openSync, readSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** Enough bytes for the last lines of any sane log without reading a large file whole. */
const TAIL_WINDOW_BYTES = 256 * 1024;
const FOLLOW_INTERVAL_MS = 500;
const NEWLINE = 0x0a;

function readRange(file: string, start: number, end: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const buffer = Buffer.alloc(end - start);
    return buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, start));
  } finally {
    closeSync(fd);
  }
}

function fileSize(file: string): number {
  return existsSync(file) ? statSync(file).size : 0;
}

export function tailLines(file: string, count: number): string[] {
  const size = fileSize(file);
  if (size === 0) return [];
  const lines = readRange(file, Math.max(0, size - TAIL_WINDOW_BYTES), size)
    .toString('utf8')
    .split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines.slice(-count);
}

export interface LogSource {
  label: string;
  file: string;
}

/** Prints what is appended to the files, each line prefixed with its source, until interrupted. */
export async function followLogs(
  sources: readonly LogSource[],
  write: (line: string) => void,
): Promise<never> {
  const offsets = new Map(sources.map(({ file }) => [file, fileSize(file)]));
  // Bytes after the last newline wait for the rest of their line (which may split a UTF-8 character).
  const pending = new Map<string, Buffer>();
  for (;;) {
    for (const { label, file } of sources) {
      const size = fileSize(file);
      let offset = offsets.get(file) ?? 0;
      if (size < offset) offset = 0; // truncated or replaced: read it again from the start
      if (size === offset) continue;
      const bytes = Buffer.concat([pending.get(file) ?? Buffer.alloc(0), readRange(file, offset, size)]);
      offsets.set(file, size);
      const end = bytes.lastIndexOf(NEWLINE) + 1;
      pending.set(file, bytes.subarray(end));
      if (end === 0) continue;
      for (const line of bytes
        .subarray(0, end - 1)
        .toString('utf8')
        .split('\n'))
        write(sources.length > 1 ? `${label} | ${line}` : line);
    }
    await sleep(FOLLOW_INTERVAL_MS);
  }
}
