import type { Static } from '@sinclair/typebox';
import type { DatabasePool } from 'slonik';
import type { Principal } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors, type FieldError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Sandbox } from '../../platform/sandbox.js';
import type { Transaction } from '../../platform/transaction.js';
import { STUDIO_PHOTO, STUDIO_VIDEO } from '../media/schema.js';
import type { MediaService } from '../media/service.js';
import { studioSandbox } from './sandbox.js';
import {
  OBJECT_ID_PATTERN,
  type StudioCreate,
  type StudioKind,
  type StudioListQuery,
  type StudioRow,
  type StudioUpdate,
} from './schema.js';
import { type Scope, studioStore } from './store.js';

/** What a storage object's file says: sent with an object id, each is a 422 naming it. */
const FROM_THE_FILE = {
  width: 'is read from the file',
  height: 'is read from the file',
  thumbnail_url: 'is made from the file',
} as const;

/** The https scheme and a host right after it (never `https:///…`, whose host a browser would guess). */
const HTTPS_WITH_HOST = /^https:\/\/[^/\\?#@]/i;
/** Kept as given, so nothing a browser would strip or reinterpret: no spaces, no control characters. */
const BLANK_OR_CONTROL = /[\s\p{Cc}]/u;

/** Why a value is not an https URL this API keeps as given, or null when it is one. */
function notHttps(value: string): string | null {
  if (BLANK_OR_CONTROL.test(value)) return 'it holds spaces or control characters';
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    return 'it is not a URL';
  }
  if (parsed.protocol !== 'https:') return `${parsed.protocol} is refused`;
  if (!HTTPS_WITH_HOST.test(value)) return 'no host follows https://';
  if (parsed.username !== '' || parsed.password !== '') return 'it holds credentials';
  return null;
}

/** The 422 field of a value that must be an https URL, or none. */
function httpsField(field: string, value: string | null | undefined, alternative = ''): FieldError[] {
  const why = typeof value === 'string' ? notHttps(value) : null;
  return why === null
    ? []
    : [{ in: 'body', field, message: `must be an https:// URL${alternative} (${why})` }];
}

/** Refuses every failing field at once. */
function refuse(fields: FieldError[]): void {
  if (fields.length > 0) throw errors.validation(fields);
}

const fileFieldsSent = (input: {
  width?: unknown;
  height?: unknown;
  thumbnail_url?: unknown;
}): FieldError[] =>
  (Object.keys(FROM_THE_FILE) as (keyof typeof FROM_THE_FILE)[])
    .filter((field) => input[field] !== undefined)
    .map((field) => ({ in: 'body', field, message: `${FROM_THE_FILE[field]} of a storage object` }));

const notFound = (id: string) => errors.notFound(`Studio asset ${id}`);

/**
 * The studio: an app's persistent photos and videos, kept with its secret key. An asset is either an
 * https URL of the app's own, kept as given with the size and thumbnail the app declares (this API
 * never fetches it), or media made from a ready storage object of the app: checked with ffprobe,
 * with a thumbnail from ffmpeg and its size read from the file, served at a media URL without a key
 * until the asset is deleted. A test key's app gets the sandbox's assets on its first call.
 */
export function createStudioService(deps: {
  pool: DatabasePool;
  clock: Clock;
  cursors: Cursors;
  media: MediaService;
  sandbox: Sandbox;
}) {
  deps.sandbox.register(studioSandbox(deps.media.sandboxClips));
  deps.media.registerShowing((tx, mediaIds, at) => studioStore(tx).deleteShowing(mediaIds, at));
  const store = studioStore(deps.pool);

  /** The call's app and mode, its sandbox seeded first: every studio call starts here. */
  async function scoped(principal: Principal): Promise<Scope> {
    const scope = { appId: principal.appId, mode: principal.mode };
    await deps.sandbox.ensure(scope);
    return scope;
  }

  const present = (row: StudioRow) => ({
    id: row.id,
    kind: row.kind,
    // Each asset has either media or a URL (the table's check).
    ...(row.media_id === null
      ? { url: row.url!, thumbnail_url: row.thumbnail_url }
      : deps.media.urls(row.media_id)),
    title: row.title,
    width: row.width,
    height: row.height,
    tags: row.tags,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  });

  /** An asset from a storage object: checked and thumbnailed before the transaction takes a connection. */
  async function createFromObject(
    principal: Principal,
    scope: Scope,
    input: { kind: StudioKind; url: string; title: string; tags: string[] },
    tx: Transaction,
  ) {
    const draft = await deps.media.prepare(
      principal,
      { objectId: input.url },
      input.kind === 'video' ? STUDIO_VIDEO : STUDIO_PHOTO,
      { in: 'body', name: 'url' },
    );
    try {
      await deps.media.record(tx, principal, draft);
      const row = await studioStore(tx).insert(scope, {
        id: newId('sta'),
        kind: input.kind,
        source: { mediaId: draft.id },
        title: input.title,
        tags: input.tags,
        at: deps.clock.now(),
      });
      return present(row);
    } catch (error) {
      await deps.media.discard(draft);
      throw error;
    }
  }

  return {
    create: async (principal: Principal, input: Static<typeof StudioCreate>, tx: Transaction) => {
      const scope = await scoped(principal);
      const common = { kind: input.kind, title: input.title ?? '', tags: input.tags ?? [] };
      if (OBJECT_ID_PATTERN.test(input.url)) {
        refuse(fileFieldsSent(input));
        return createFromObject(principal, scope, { ...common, url: input.url }, tx);
      }
      refuse([
        ...httpsField('url', input.url, ' or the id of a ready storage object of the app (obj_…)'),
        ...httpsField('thumbnail_url', input.thumbnail_url),
      ]);
      const row = await studioStore(tx).insert(scope, {
        id: newId('sta'),
        ...common,
        source: {
          url: input.url,
          thumbnailUrl: input.thumbnail_url ?? null,
          width: input.width ?? null,
          height: input.height ?? null,
        },
        at: deps.clock.now(),
      });
      return present(row);
    },

    get: async (principal: Principal, id: string) => {
      const row = await store.asset(await scoped(principal), id);
      if (!row) throw notFound(id);
      return present(row);
    },

    list: async (principal: Principal, query: Static<typeof StudioListQuery>) => {
      const scope = await scoped(principal);
      const position = deps.cursors.decode(query.cursor);
      const rows = await store.list(scope, {
        ...(query.kind === undefined ? {} : { kind: query.kind }),
        ...(position ? { after: position } : {}),
        limit: query.limit + 1,
      });
      return deps.cursors.page(rows, query.limit, present);
    },

    /** Title and tags of any asset; thumbnail_url, width and height of a URL asset only. */
    update: async (principal: Principal, id: string, input: Static<typeof StudioUpdate>, tx: Transaction) => {
      const scope = await scoped(principal);
      refuse(httpsField('thumbnail_url', input.thumbnail_url));
      const row = await studioStore(tx).update(
        scope,
        id,
        {
          ...(input.title === undefined ? {} : { title: input.title }),
          ...(input.tags === undefined ? {} : { tags: input.tags }),
          ...(input.thumbnail_url === undefined ? {} : { thumbnailUrl: input.thumbnail_url }),
          ...(input.width === undefined ? {} : { width: input.width }),
          ...(input.height === undefined ? {} : { height: input.height }),
        },
        deps.clock.now(),
      );
      if (row) return present(row);
      // Nothing took the changes: no such asset, or one whose size and thumbnail its file says.
      if (await studioStore(tx).asset(scope, id)) refuse(fileFieldsSent(input));
      throw notFound(id);
    },

    /** A soft delete: a storage object's media URLs answer 404 at once, and the object may be removed. */
    delete: async (principal: Principal, id: string, tx: Transaction) => {
      const deleted = await studioStore(tx).delete(await scoped(principal), id, deps.clock.now());
      if (!deleted) throw notFound(id);
      if (deleted.media_id !== null) await deps.media.release(tx, [deleted.media_id]);
      return { ok: true as const, id };
    },
  };
}

export type StudioService = ReturnType<typeof createStudioService>;
