import { randomBytes } from 'node:crypto';
import {
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ensureDir, writeFileAtomic } from '../src/files.js';
import type { OsUser } from '../src/os-user.js';

// Lets a test know the "random" name in advance, as an attacker never could, to plant a link right there.
vi.mock('node:crypto', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:crypto')>();
  return { ...actual, randomBytes: vi.fn(actual.randomBytes) };
});
const KNOWN_BYTES = Buffer.alloc(8, 0xab);
const knowNextRandomName = () => vi.mocked(randomBytes).mockImplementationOnce(() => KNOWN_BYTES);

/** A service account that is not the runner's (root's, in these tests): it owns the directory. */
const SERVICE_USER: OsUser = { name: 'nobody', uid: 65534, gid: 65534 };

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A directory the service user could write into, and a file of root's outside it that it must not reach. */
function setUp() {
  const dir = mkdtempSync(join(tmpdir(), 'stack-files-'));
  dirs.push(dir);
  const spool = join(dir, 'spool');
  mkdirSync(spool);
  const victim = join(dir, 'passwd');
  writeFileSync(victim, 'root:x:0:0\n', { mode: 0o644 });
  return { spool, victim, cookie: join(spool, '.erlang.cookie') };
}

function expectUntouched(victim: string): void {
  expect(readFileSync(victim, 'utf8')).toBe('root:x:0:0\n');
  expect(statSync(victim)).toMatchObject({ uid: 0, gid: 0, mode: 0o100644 });
}

describe('writeFileAtomic into a directory its owner controls', () => {
  it('ignores a symlink planted at the predictable name <file>.<pid>.tmp', () => {
    const { spool, victim, cookie } = setUp();
    const planted = `${cookie}.${process.pid}.tmp`;
    symlinkSync(victim, planted);

    writeFileAtomic(cookie, 'secret', SERVICE_USER, 0o400);

    expectUntouched(victim);
    expect(lstatSync(cookie).isFile()).toBe(true);
    expect(readFileSync(cookie, 'utf8')).toBe('secret');
    expect(statSync(cookie)).toMatchObject({ uid: SERVICE_USER.uid, gid: SERVICE_USER.gid, mode: 0o100400 });
    expect(readlinkSync(planted)).toBe(victim);
    expect(readdirSync(spool).sort()).toEqual(['.erlang.cookie', `.erlang.cookie.${process.pid}.tmp`]);
  });

  it('refuses a symlink planted even at the random name it picks, rather than write through it', () => {
    const { spool, victim, cookie } = setUp();
    knowNextRandomName();
    const planted = `${cookie}.${KNOWN_BYTES.toString('hex')}.tmp`;
    symlinkSync(victim, planted);

    expect(() => writeFileAtomic(cookie, 'secret', SERVICE_USER, 0o400)).toThrow(/EEXIST/);

    expectUntouched(victim);
    expect(readdirSync(spool)).toEqual([planted.slice(spool.length + 1)]);
  });

  it('leaves alone a file at a name it could once be expected to use', () => {
    const { spool, cookie } = setUp();
    const othersTemporary = `${cookie}.${process.pid}.tmp`;
    writeFileSync(othersTemporary, 'another run');

    writeFileAtomic(cookie, 'first');
    writeFileAtomic(cookie, 'second');

    expect(readFileSync(othersTemporary, 'utf8')).toBe('another run');
    expect(readFileSync(cookie, 'utf8')).toBe('second');
    expect(readdirSync(spool).sort()).toEqual(['.erlang.cookie', `.erlang.cookie.${process.pid}.tmp`]);
  });

  it('removes its temporary file when the rename fails', () => {
    const { spool, cookie } = setUp();
    mkdirSync(join(cookie, 'in-the-way'), { recursive: true });

    expect(() => writeFileAtomic(cookie, 'secret')).toThrow();

    expect(readdirSync(spool)).toEqual(['.erlang.cookie']);
  });
});

describe('ensureDir handing a tree to its owner', () => {
  it('gives a symlink planted in the tree to the owner, not the file it points at', () => {
    const { spool, victim } = setUp();
    symlinkSync(victim, join(spool, 'link'));

    ensureDir(spool, SERVICE_USER, 0o700);

    expectUntouched(victim);
    expect(lstatSync(join(spool, 'link')).uid).toBe(SERVICE_USER.uid);
    expect(statSync(spool).uid).toBe(SERVICE_USER.uid);
  });
});
