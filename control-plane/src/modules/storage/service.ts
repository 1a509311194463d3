import { type DatabasePool, ForeignKeyIntegrityConstraintViolationError } from 'slonik';
import type { ObjectStore } from '../../adapters/s3.js';
import type { AppScope, Principal } from '../../platform/caller.js';
import { type Clock, utcDay } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Metering } from '../../platform/metering.js';
import { pruneInBatches } from '../../platform/pruning.js';
import { type Db, inTransaction, type Transaction } from '../../platform/transaction.js';
import {
  ACTIVE_DOCUMENT_NAME,
  isAllowedContentType,
  looksLikeActiveDocument,
  PENDING_LIFETIME_MS,
  type StorageObjectRow,
  TEST_OBJECT_DAYS,
  TEST_QUOTA_BYTES,
  UPLOAD_URL_SECONDS,
  USER_UPLOAD_MAX_BYTES,
} from './schema.js';
import { storageStore } from './store.js';

/** How many bytes are read to recognise an HTML or SVG document sent under another type. */
const SNIFF_BYTES = 512;
/** S3's multi-object delete takes up to 1,000 keys. */
const SWEEP_BATCH = 1_000;
/** Days whose metering claims are kept: a week, where a run needs only the day it started on. */
const METERED_DAYS_KEPT = 7;

export function present(row: StorageObjectRow) {
  return {
    id: row.id,
    status: row.status,
    name: row.name,
    content_type: row.content_type,
    size_bytes: row.size_bytes ?? row.declared_size,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    completed_at: row.completed_at?.toISOString() ?? null,
  };
}

const refusedType = (contentType: string) =>
  errors.invalidField(
    'body',
    'content_type',
    `${contentType} is not accepted: images, MP4/WebM/QuickTime/Matroska video, audio, PDF, JSON, CSV, plain text, WebVTT and ZIP are; HTML and SVG never`,
  );

/** Object keys: the key mode first, so lifecycle rules can target test objects by prefix. */
export const storageKeyOf = (mode: string, appId: string, objectId: string) => `${mode}/${appId}/${objectId}`;

/** Keys of storage objects: the storage key space, apart from what other products keep in the bucket. */
const isObjectKey = (key: string) => key.startsWith('live/') || key.startsWith('test/');

const backsMedia = () =>
  errors.conflict(
    'The object is shown as public media (a moment or a studio asset): delete that first, then the object',
    'OBJECT_IN_USE',
  );

/**
 * Storage objects. `releaseMedia` takes down the public media made from objects that go without being
 * asked (a test object's seven days, a MinIO lifecycle expiry); an object the app removes itself while
 * it backs media is a 409 instead.
 */
export function createStorageService(deps: {
  pool: DatabasePool;
  clock: Clock;
  objects: ObjectStore;
  metering: Metering;
  cursors: Cursors;
  releaseMedia: (tx: Transaction, objectIds: readonly string[]) => Promise<void>;
  onError?: (error: unknown) => void;
}) {
  /** The object of the caller's app and mode; a user's own only, when `ownerUserId` is given. */
  async function requireObject(
    principal: AppScope,
    id: string,
    ownerUserId?: string,
  ): Promise<StorageObjectRow> {
    const row = await storageStore(deps.pool).find(id, principal.appId, principal.mode, ownerUserId);
    if (!row) throw errors.notFound(`Object ${id}`);
    return row;
  }

  /** The record first (it may back media: 409, nothing lost), the bytes before its commit. */
  async function removeObject(row: StorageObjectRow): Promise<void> {
    await inTransaction(deps.pool, async (tx) => {
      try {
        await storageStore(tx).delete(row.id);
      } catch (error) {
        if (error instanceof ForeignKeyIntegrityConstraintViolationError) throw backsMedia();
        throw error;
      }
      await deps.objects.remove(row.storage_key);
    });
  }

  /** Records of objects whose bytes went: their media go with them. */
  const forgetObjects = (ids: readonly string[]) =>
    inTransaction(deps.pool, async (tx) => {
      await deps.releaseMedia(tx, ids);
      await storageStore(tx).deleteMany(ids);
    });

  return {
    /** Reserves an upload (priced per upload) and signs the PUT URL for the public endpoint. */
    reserveUpload: async (
      principal: Principal,
      input: { name: string; content_type: string; size_bytes: number; metadata?: Record<string, string> },
      tx: Db,
      ownerUserId: string | null = null,
    ) => {
      if (!isAllowedContentType(input.content_type)) throw refusedType(input.content_type);
      // A user uploads what they can publish: a video, at most 2 GiB (three minutes of 4K).
      if (ownerUserId !== null) {
        if (!input.content_type.toLowerCase().startsWith('video/')) {
          throw errors.invalidField(
            'body',
            'content_type',
            'is not a video: users upload videos to publish as moments',
          );
        }
        if (input.size_bytes > USER_UPLOAD_MAX_BYTES) {
          throw errors.invalidField(
            'body',
            'size_bytes',
            `is over ${USER_UPLOAD_MAX_BYTES} bytes (2 GiB), a user upload's limit`,
          );
        }
      }
      if (ACTIVE_DOCUMENT_NAME.test(input.name)) {
        throw errors.invalidField('body', 'name', 'HTML and SVG files are not accepted');
      }
      const id = newId('obj');
      const storageKey = storageKeyOf(principal.mode, principal.appId, id);
      const store = storageStore(tx);
      if (principal.mode === 'test') {
        await store.lockQuota(principal.appId, principal.mode);
        const used = await store.usedBytes(principal.appId, principal.mode);
        if (used + input.size_bytes > TEST_QUOTA_BYTES) {
          throw errors.forbidden(
            `Test keys store at most 1 GB per app; ${Math.max(0, TEST_QUOTA_BYTES - used)} bytes are left`,
            'QUOTA_EXCEEDED',
          );
        }
      }
      const row = await store.insert({
        id,
        appId: principal.appId,
        accountId: principal.accountId,
        mode: principal.mode,
        name: input.name,
        contentType: input.content_type,
        declaredSize: input.size_bytes,
        metadata: input.metadata ?? {},
        storageKey,
        ownerUserId,
        at: deps.clock.now(),
      });
      return {
        object: present(row),
        upload_url: await deps.objects.presignUpload(
          storageKey,
          input.content_type,
          input.size_bytes,
          UPLOAD_URL_SECONDS,
        ),
        upload_method: 'PUT' as const,
        // Signed into the URL: any other type or size is refused, and so is a second upload.
        upload_headers: {
          'Content-Type': input.content_type,
          'Content-Length': String(input.size_bytes),
          'If-None-Match': '*' as const,
        },
        expires_in: UPLOAD_URL_SECONDS,
      };
    },

    /** Checks the bytes are in MinIO at their declared size, and makes the object ready. */
    complete: async (principal: Principal, id: string, ownerUserId?: string) => {
      const row = await requireObject(principal, id, ownerUserId);
      if (row.status === 'ready') return present(row);
      // The size is signed into the upload URL, so bytes that are there have the declared size.
      const arrived = await deps.objects.arrived(row.storage_key, SNIFF_BYTES);
      if (arrived === null)
        throw errors.conflict('The upload has not arrived: PUT the file to upload_url first');
      if (looksLikeActiveDocument(arrived.firstBytes)) {
        // Refused whole: bytes and record go, whatever type the file was declared with.
        await removeObject(row);
        throw errors.invalidField('body', '(file)', 'is HTML or SVG, which is not accepted');
      }
      return present(await storageStore(deps.pool).markReady(row.id, arrived.size, deps.clock.now()));
    },

    /**
     * A ready object with a signed read URL (priced per URL). It writes nothing, so it reads outside
     * the charge's transaction and the charge is one statement of its own.
     */
    read: async (principal: AppScope, id: string, query: { expires_in: number; download: boolean }) => {
      const row = await requireObject(principal, id);
      if (row.status !== 'ready')
        throw errors.conflict('The object is pending: complete the upload before reading it');
      const url = await deps.objects.presignDownload(
        row.storage_key,
        query.expires_in,
        query.download ? row.name : undefined,
      );
      return { ...present(row), url, expires_in: query.expires_in };
    },

    list: async (
      principal: AppScope,
      query: { limit: number; cursor?: string; status?: 'pending' | 'ready' },
    ) => {
      const rows = await storageStore(deps.pool).page({
        appId: principal.appId,
        mode: principal.mode,
        limit: query.limit + 1,
        ...(query.status ? { status: query.status } : {}),
        ...(query.cursor ? { after: deps.cursors.decode(query.cursor) } : {}),
      });
      return deps.cursors.page(rows, query.limit, present);
    },

    /** Removes the bytes and the record: URLs already issued stop working. */
    remove: async (principal: AppScope, id: string) => {
      await removeObject(await requireObject(principal, id));
      return { ok: true as const, id };
    },

    /**
     * A ready object whose bytes a product reads (a moment's video, a studio photo): the app's, or the
     * user's own when `ownerUserId` is given (404 otherwise, as if it did not exist); 409 while pending.
     */
    readyObject: async (principal: Principal, id: string, ownerUserId?: string) => {
      const row = await requireObject(principal, id, ownerUserId);
      if (row.status !== 'ready')
        throw errors.conflict('The object is pending: complete the upload before using it');
      return {
        id: row.id,
        storageKey: row.storage_key,
        contentType: row.content_type,
        sizeBytes: row.size_bytes!,
      };
    },

    /** MinIO reported an object gone (a lifecycle rule, an operator): its record and media go too. */
    forgetRemovedKey: async (storageKey: string) => {
      const id = await storageStore(deps.pool).idByKey(storageKey);
      if (id !== null) await forgetObjects([id]);
    },

    /**
     * MinIO reported bytes written: without a record (an upload URL of a deleted object, anything
     * written behind the API's back) nothing would ever bill or sweep them, so they go. A reservation's
     * record is committed before its URL is handed out, so a real upload always finds it.
     */
    removeUnrecordedKey: async (storageKey: string) => {
      if (!isObjectKey(storageKey)) return;
      if (!(await storageStore(deps.pool).existsByKey(storageKey))) await deps.objects.remove(storageKey);
    },

    /** Pending uploads older than a day and test objects older than 7 days: bytes and records. */
    sweep: async (): Promise<number> => {
      const now = deps.clock.now().getTime();
      let removed = 0;
      for (;;) {
        const expired = await storageStore(deps.pool).expired(
          new Date(now - PENDING_LIFETIME_MS),
          new Date(now - TEST_OBJECT_DAYS * 86_400_000),
          SWEEP_BATCH,
        );
        // Bytes first: a record outlives its bytes only until the next sweep, never the reverse.
        await deps.objects.removeMany(expired.map((row) => row.storage_key));
        await forgetObjects(expired.map((row) => row.id));
        removed += expired.length;
        if (expired.length < SWEEP_BATCH) return removed;
      }
    },

    /** Forgets which days were metered a week ago and before: a run only claims the day it starts on. */
    pruneMeteredDays: () => {
      const before = utcDay(new Date(deps.clock.now().getTime() - METERED_DAYS_KEPT * 86_400_000));
      return pruneInBatches((limit) => storageStore(deps.pool).pruneMeteredDays(before, limit));
    },

    /** Meters the bytes each app keeps today, once per app, mode and UTC day (as byte-days). */
    meterStoredBytes: async (): Promise<number> => {
      const day = utcDay(deps.clock.now());
      let metered = 0;
      for (const stored of await storageStore(deps.pool).unmeteredStoredBytes(day)) {
        await inTransaction(
          deps.pool,
          async (tx) => {
            if (!(await storageStore(tx).claimMeteredDay(stored.app_id, stored.mode, day))) return;
            await deps.metering.meter(
              tx,
              { accountId: stored.account_id, appId: stored.app_id, mode: stored.mode },
              [{ product: 'storage', metric: 'gb_days', quantity: stored.bytes }],
              // The day claimed, not the day it is by now: a run that crosses midnight bills each day once.
              day,
            );
            metered += 1;
          },
          deps.onError,
        );
      }
      return metered;
    },
  };
}

export type StorageService = ReturnType<typeof createStorageService>;
