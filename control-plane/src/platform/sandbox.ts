import { createHash } from 'node:crypto';
import type { DatabasePool } from 'slonik';
import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from './caller.js';
import type { Clock } from './clock.js';
import { UpstreamError } from './errors.js';
import { type Db, inTransaction, type Transaction } from './transaction.js';

/** One product's share of the test mode's sandbox (profiles and buzzes, moments, About content…). */
export interface SandboxPart {
  /** Recorded per app once seeded: a part added by an upgrade is seeded into older sandboxes too. */
  name: string;
  /**
   * Work outside any transaction before the part is first seeded in this process (rendering the
   * media its fixtures point at): once per process, again after a failure; it may be shared by parts.
   */
  prepare?: () => Promise<void>;
  /** Writes the part's fixtures for one app, in the seeding's transaction. */
  seed(tx: Transaction, appId: string, at: Date): Promise<void>;
}

const Seeded = z.object({ part: z.string() });
/** A failed preparation (MinIO away) is tried again after this long; calls meanwhile get a 503. */
const PREPARE_RETRY_MS = 10_000;

/**
 * The test mode's sandbox: every public-data product registers its part (in the order they depend on
 * each other: profiles first), and each call of a test key seeds what its app lacks before it reads
 * or writes, so a user can never take a fixture's username first. A seeding runs in a transaction of
 * its own (a write that fails afterwards keeps the sandbox), before a write's first statement, while
 * its transaction holds no connection yet.
 */
export function createSandbox(deps: { pool: DatabasePool; clock: Clock }) {
  const parts: SandboxPart[] = [];
  /** Apps whose sandbox this process knows to be complete: one look at the table per app and process. */
  const complete = new Set<string>();
  /** Each part's preparation, once per process; a failure is kept a while so calls fail fast. */
  const prepared = new Map<SandboxPart, Promise<void>>();

  const prepare = (part: SandboxPart) => {
    let preparing = prepared.get(part);
    if (!preparing) {
      preparing = (part.prepare?.() ?? Promise.resolve()).catch((error: unknown) => {
        setTimeout(() => prepared.delete(part), PREPARE_RETRY_MS).unref();
        throw new UpstreamError(
          'storage',
          `the sandbox's ${part.name} could not be prepared: ${String(error)}`,
        );
      });
      prepared.set(part, preparing);
    }
    return preparing;
  };

  const seededParts = async (db: Db, appId: string) =>
    new Set(await db.anyFirst(sql.type(Seeded)`select part from sandboxes where app_id = ${appId}`));

  return {
    register(part: SandboxPart): void {
      if (parts.some((known) => known.name === part.name)) throw new Error(`sandbox part ${part.name} twice`);
      parts.push(part);
    },

    async ensure(scope: { appId: string; mode: KeyMode }): Promise<void> {
      if (scope.mode !== 'test' || complete.has(scope.appId)) return;
      // Only what the app lacks is prepared: a seeded sandbox needs nothing of MinIO or ffmpeg.
      const seeded = await seededParts(deps.pool, scope.appId);
      const missing = parts.filter((part) => !seeded.has(part.name));
      if (missing.length > 0) {
        await Promise.all(missing.map(prepare));
        await inTransaction(deps.pool, async (tx) => {
          // Replicas seeding the same app at once wait for the first, then find it seeded.
          await tx.query(sql.unsafe`select pg_advisory_xact_lock(hashtext('sandbox:' || ${scope.appId}))`);
          const done = await seededParts(tx, scope.appId);
          const at = deps.clock.now();
          for (const part of missing.filter((known) => !done.has(known.name))) {
            await part.seed(tx, scope.appId, at);
            await tx.query(sql.unsafe`
              insert into sandboxes (app_id, part, seeded_at)
              values (${scope.appId}, ${part.name}, ${sql.timestamp(at)})`);
          }
        });
      }
      complete.add(scope.appId);
    },
  };
}

export type Sandbox = ReturnType<typeof createSandbox>;

/**
 * The fixture ids of an app's sandbox, unique across apps: 80 bits of a hash of the app id tell the
 * apps apart, and the "_" after "sbx" keeps them apart from newId's, whose random part is base62. A
 * number is written with `digits` digits.
 */
export function sandboxIds(appId: string) {
  const appTag = createHash('sha256').update(appId).digest('hex').slice(0, 20);
  return (prefix: string, name: string | number, digits = 5) =>
    `${prefix}_sbx_${appTag}_${typeof name === 'number' ? String(name).padStart(digits, '0') : name}`;
}
