import { execFileSync } from 'node:child_process';
import { StackError } from './errors.js';

export interface OsUser {
  name: string;
  uid: number;
  gid: number;
}

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

function lookupOsUser(name: string): OsUser {
  let entry: string;
  try {
    entry = execFileSync('getent', ['passwd', name], { encoding: 'utf8' });
  } catch {
    throw new StackError(
      `OS user "${name}" does not exist (its Debian package creates it: run the install step)`,
    );
  }
  const [, , uid, gid] = entry.trim().split(':');
  return { name, uid: Number(uid), gid: Number(gid) };
}

/**
 * The account a server runs as. Only root can switch users, and only root has to: PostgreSQL refuses
 * to run as root, and ejabberd and Redis should not. Any other user runs every server as itself.
 */
export function serviceUser(name: string | undefined): OsUser | undefined {
  return name !== undefined && isRoot() ? lookupOsUser(name) : undefined;
}
