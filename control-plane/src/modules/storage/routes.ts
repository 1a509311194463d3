import { Type } from '@sinclair/typebox';
import { route } from '../../platform/route.js';
import {
  DeleteResponse,
  ListQuery,
  ListResponse,
  ObjectParams,
  ReadQuery,
  ReadResponse,
  StorageObject,
  UploadRequest,
  UploadResponse,
  USER_UPLOADS,
} from './schema.js';
import type { StorageService } from './service.js';

/** What one MinIO notification says happened: keys created and keys removed; nothing unrecognisable. */
export function bucketEvents(body: unknown): { created: string[]; removed: string[] } {
  const events = { created: [] as string[], removed: [] as string[] };
  const records = (body as { Records?: unknown } | null)?.Records;
  if (!Array.isArray(records)) return events;
  for (const record of records as { eventName?: unknown; s3?: { object?: { key?: unknown } } }[]) {
    const key = record?.s3?.object?.key;
    const name = record?.eventName;
    if (typeof name !== 'string' || typeof key !== 'string') continue;
    const kind = name.startsWith('s3:ObjectCreated:')
      ? 'created'
      : name.startsWith('s3:ObjectRemoved:')
        ? 'removed'
        : undefined;
    if (!kind) continue;
    try {
      // The record's key is form-encoded: '+' is a space, '%2B' a plus.
      events[kind].push(decodeURIComponent(key.replace(/\+/g, ' ')));
    } catch {
      // Not a key this API ever wrote.
    }
  }
  return events;
}

export const storageRoutes = (storage: StorageService) => [
  route({
    operationId: 'storage.uploads.create',
    method: 'POST',
    url: '/v1/storage/uploads',
    auth: 'secret-key',
    tags: ['storage'],
    summary: 'Reserve an upload: PUT the file to upload_url with exactly the declared Content-Type',
    body: UploadRequest,
    response: UploadResponse,
    status: 201,
    errors: [403],
    price: { product: 'storage', metric: 'uploads' },
    // One insert: a turn of live reservations shares a transaction (test keys' quota lock goes alone).
    chargedTogether: true,
    handler: ({ caller, body, tx }) => storage.reserveUpload(caller, body, tx),
  }),
  route({
    operationId: 'storage.objects.complete',
    method: 'POST',
    url: '/v1/storage/objects/:object_id/complete',
    auth: 'secret-key',
    tags: ['storage'],
    summary: 'Check that the bytes arrived at their declared size and make the object ready',
    params: ObjectParams,
    response: StorageObject,
    errors: [404, 409],
    handler: ({ caller, params }) => storage.complete(caller, params.object_id),
  }),
  // ----- the signed-in user (user token): their own uploads, for their moments ----------------
  route({
    operationId: 'me.storage.uploads.create',
    method: 'POST',
    url: '/v1/me/storage/uploads',
    auth: 'user-token',
    tags: ['me'],
    summary: 'Reserve an upload of the user’s own (a video to publish as a moment), as the app’s server does',
    body: UploadRequest,
    response: UploadResponse,
    status: 201,
    errors: [403],
    price: { product: 'storage', metric: 'uploads' },
    // One insert: a turn of live reservations shares a transaction (test keys' quota lock goes alone).
    chargedTogether: true,
    perUser: USER_UPLOADS,
    handler: ({ caller, body, tx }) => storage.reserveUpload(caller, body, tx, caller.userId),
  }),
  route({
    operationId: 'me.storage.objects.complete',
    method: 'POST',
    url: '/v1/me/storage/objects/:object_id/complete',
    auth: 'user-token',
    tags: ['me'],
    summary: 'Make the user’s upload ready once its bytes arrived; another’s object is a 404',
    params: ObjectParams,
    response: StorageObject,
    errors: [404, 409],
    perUser: USER_UPLOADS,
    handler: ({ caller, params }) => storage.complete(caller, params.object_id, caller.userId),
  }),
  route({
    operationId: 'storage.objects.list',
    method: 'GET',
    url: '/v1/storage/objects',
    auth: 'secret-key',
    tags: ['storage'],
    summary: 'Objects newest first, a page at a time',
    query: ListQuery,
    response: ListResponse,
    handler: ({ caller, query }) => storage.list(caller, query),
  }),
  route({
    operationId: 'storage.objects.read',
    method: 'GET',
    url: '/v1/storage/objects/:object_id',
    auth: 'secret-key',
    tags: ['storage'],
    summary: 'A ready object with a signed URL (answers Range requests)',
    params: ObjectParams,
    query: ReadQuery,
    response: ReadResponse,
    errors: [404, 409],
    price: { product: 'storage', metric: 'signed_urls' },
    handler: ({ caller, params, query }) => storage.read(caller, params.object_id, query),
  }),
  route({
    operationId: 'storage.objects.delete',
    method: 'DELETE',
    url: '/v1/storage/objects/:object_id',
    auth: 'secret-key',
    tags: ['storage'],
    summary:
      'Remove the bytes and the record; URLs already issued stop working (409 while it backs public media)',
    params: ObjectParams,
    response: DeleteResponse,
    errors: [404, 409],
    handler: ({ caller, params }) => storage.remove(caller, params.object_id),
  }),
  /**
   * MinIO's bucket notifications: an object removed behind the API's back (lifecycle expiry) loses its
   * record, so stored bytes stay true; bytes written without a record are removed, so nothing is
   * stored that is not billed. MinIO retries any non-2xx answer forever and holds every later
   * event back meanwhile, so an event this endpoint cannot use is acknowledged, never refused; only a
   * failure a retry can cure (the database away) answers 500. Handling an event twice is harmless.
   */
  route({
    operationId: 'storage.events',
    method: 'POST',
    url: '/internal/minio/events',
    auth: 'internal',
    internalCaller: 'minio',
    tags: ['internal'],
    summary: 'MinIO’s bucket notifications',
    hidden: true,
    body: Type.Unknown(),
    response: Type.Object({ ok: Type.Boolean() }),
    handler: async ({ body }) => {
      const { created, removed } = bucketEvents(body);
      for (const key of created) await storage.removeUnrecordedKey(key);
      for (const key of removed) await storage.forgetRemovedKey(key);
      return { ok: true };
    },
  }),
];
