/** The benchmark's accept-all external-auth program, driven as ejabberd drives it. */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { frame } from './frames.js';

const PROGRAM = fileURLToPath(new URL('../accept-all-auth.mjs', import.meta.url));

describe('accept-all external auth', () => {
  it('says yes to every auth and isuser, no to every other op, in request order, and exits when stdin closes', async () => {
    const child = spawn(process.execPath, [PROGRAM]);
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    const requests = [
      'auth:anyone:accept-all.local:any:password',
      'isuser:nobody:accept-all.local',
      'setpass:anyone:accept-all.local:pw',
      'tryregister:anyone:accept-all.local:pw',
      'removeuser:anyone:accept-all.local',
      'auth:bo:accept-all.local:',
    ];
    // Split mid-frame, as a pipe may deliver it.
    const bytes = Buffer.concat(requests.map(frame));
    child.stdin.write(bytes.subarray(0, 5));
    child.stdin.end(bytes.subarray(5));
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    const stdout = Buffer.concat(chunks);
    // Every reply is exactly 00 02 00 0N; anything else on stdout breaks ejabberd's port.
    expect([...stdout]).toEqual([1, 1, 0, 0, 0, 1].flatMap((verdict) => [0, 2, 0, verdict]));
  });
});
