import { chownSync, mkdirSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OsUser } from './os-user.js';

/** Gives a tree to its server's user; walks the tree only when the top belongs to someone else. */
function chownTree(path: string, owner: OsUser): void {
  const stat = statSync(path);
  if (stat.uid === owner.uid && stat.gid === owner.gid) return;
  chownSync(path, owner.uid, owner.gid);
  if (!stat.isDirectory()) return;
  for (const entry of readdirSync(path, { recursive: true, encoding: 'utf8' }))
    chownSync(join(path, entry), owner.uid, owner.gid);
}

export function ensureDir(path: string, owner?: OsUser, mode = 0o755): void {
  mkdirSync(path, { recursive: true, mode });
  if (owner) chownTree(path, owner);
}

/** Writes via a temporary file and rename, so a reader never sees half a file; mode 0600 by default. */
export function writeFileAtomic(path: string, content: string, owner?: OsUser, mode = 0o600): void {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, content, { mode });
  if (owner) chownSync(temporary, owner.uid, owner.gid);
  renameSync(temporary, path);
}
