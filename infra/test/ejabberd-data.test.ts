import {
  chownSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { text } from 'node:stream/consumers';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { copyIntoSpool, openDump } from '../src/backup/ejabberd-data.js';
import { unguessable } from '../src/files.js';
import type { OsUser } from '../src/os-user.js';

// The backup's file handling in ejabberd's spool, which ejabberd's account owns and the runner (root,
// in these tests) reads and writes: nothing that account plants there may reach root's files.
// backup-restore.test.ts takes a real backup of the test stack's ejabberd and restores it.

const EJABBERD_USER: OsUser = { name: 'ejabberd', uid: 65534, gid: 65534 };
const DUMP = '{tables,[{muc_room,[]}]}.\n';
const SECRET = 'root:$6$hash:19000::::::\n';

let dir: string;
let spool: string;
/** A file of root's outside the spool that ejabberd's account must neither read nor change. */
let victim: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'stack-ejabberd-data-'));
  spool = join(dir, 'spool');
  mkdirSync(spool);
  victim = join(dir, 'shadow');
  writeFileSync(victim, SECRET, { mode: 0o600 });
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function expectVictimUntouched(): void {
  expect(readFileSync(victim, 'utf8')).toBe(SECRET);
  expect(statSync(victim)).toMatchObject({ uid: 0, gid: 0, mode: 0o100600 });
}

describe('the dump ejabberd wrote into its spool', () => {
  it('is read when it is a file of ejabberd’s own', async () => {
    const dumped = join(spool, 'ejabberd.dump');
    writeFileSync(dumped, DUMP);
    chownSync(dumped, EJABBERD_USER.uid, EJABBERD_USER.gid);
    const handle = await openDump(dumped, EJABBERD_USER);
    expect(await text(handle.createReadStream())).toBe(DUMP);
  });

  it('is refused when ejabberd’s account put a symlink at its name', async () => {
    const dumped = join(spool, 'ejabberd.dump');
    symlinkSync(victim, dumped);
    await expect(openDump(dumped, EJABBERD_USER)).rejects.toThrow(/ELOOP/);
    expectVictimUntouched();
  });

  it('is refused when it is not ejabberd’s own file, such as a hard link to root’s', async () => {
    const dumped = join(spool, 'ejabberd.dump');
    linkSync(victim, dumped);
    await expect(openDump(dumped, EJABBERD_USER)).rejects.toThrow(/not a regular file of ejabberd's/);
    expectVictimUntouched();
  });
});

describe('the copy of a backup handed to ejabberd in its spool', () => {
  it('is a file its account owns and nobody else reads', async () => {
    const source = join(dir, 'backup.dump');
    writeFileSync(source, DUMP);
    const loaded = join(spool, `svc-restore-${unguessable()}.dump`);
    await copyIntoSpool(source, loaded, EJABBERD_USER);
    expect(readFileSync(loaded, 'utf8')).toBe(DUMP);
    expect(statSync(loaded)).toMatchObject({
      uid: EJABBERD_USER.uid,
      gid: EJABBERD_USER.gid,
      mode: 0o100600,
    });
  });

  it('is never written through a symlink planted at its name', async () => {
    const source = join(dir, 'backup.dump');
    writeFileSync(source, DUMP);
    const loaded = join(spool, `svc-restore-${unguessable()}.dump`);
    symlinkSync(victim, loaded);
    await expect(copyIntoSpool(source, loaded, EJABBERD_USER)).rejects.toThrow(/EEXIST/);
    expectVictimUntouched();
  });
});
