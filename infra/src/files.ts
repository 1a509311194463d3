import { randomBytes } from 'node:crypto';
import {
  chownSync,
  closeSync,
  constants,
  fchownSync,
  lchownSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { OsUser } from './os-user.js';

/**
 * Open flags for a file root creates in a directory a service user controls: O_EXCL refuses any
 * existing name, a symlink included, so nothing planted there is written through; O_NOFOLLOW as well.
 */
export const EXCLUSIVE_CREATE =
  constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** A file name part nobody can guess in advance, so nobody can plant something at the name first. */
export const unguessable = () => randomBytes(8).toString('hex');

/** Gives a tree to its server's user; walks the tree only when the top belongs to someone else. */
function chownTree(path: string, owner: OsUser): void {
  const stat = statSync(path);
  if (stat.uid === owner.uid && stat.gid === owner.gid) return;
  chownSync(path, owner.uid, owner.gid);
  if (!stat.isDirectory()) return;
  // lchown: the owner can plant a symlink in its tree, and chown would hand it the link's target.
  for (const entry of readdirSync(path, { recursive: true, encoding: 'utf8' }))
    lchownSync(join(path, entry), owner.uid, owner.gid);
}

export function ensureDir(path: string, owner?: OsUser, mode = 0o755): void {
  mkdirSync(path, { recursive: true, mode });
  if (owner) chownTree(path, owner);
}

/**
 * Writes via a temporary file and rename, so a reader never sees half a file; mode 0600 by default.
 * The directory may belong to `owner`: the temporary file is created exclusively under an unguessable
 * name and handed over through its descriptor, never by path.
 */
export function writeFileAtomic(path: string, content: string, owner?: OsUser, mode = 0o600): void {
  const temporary = `${path}.${unguessable()}.tmp`;
  const fd = openSync(temporary, EXCLUSIVE_CREATE, mode);
  try {
    try {
      writeFileSync(fd, content);
      if (owner) fchownSync(fd, owner.uid, owner.gid);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, path);
  } catch (error) {
    // rm removes the name itself and never follows a link.
    rmSync(temporary, { force: true });
    throw error;
  }
}
