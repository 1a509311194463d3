import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { ErrorBody, ErrorResponses, SECRET_KEY_SECURITY } from '../../http/schemas.js';
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
} from './schema.js';
import type { StorageService } from './service.js';

const withNotFound = { 404: ErrorBody, ...ErrorResponses };

export const storageRoutes: FastifyPluginAsyncTypebox<{ storage: StorageService }> = async (
  app,
  { storage },
) => {
  app.post(
    '/v1/storage/uploads',
    {
      config: { operation: 'storage.uploads.create' },
      schema: {
        tags: ['storage'],
        summary: 'Reserve an upload: PUT the file to upload_url with exactly the declared Content-Type',
        security: SECRET_KEY_SECURITY,
        body: UploadRequest,
        response: { 201: UploadResponse, 402: ErrorBody, 403: ErrorBody, ...ErrorResponses },
      },
    },
    async (request, reply) => {
      const { costMicros, body } = await storage.reserveUpload(request.principal!, request.body);
      request.costMicros = costMicros;
      return reply.code(201).send(body);
    },
  );

  app.post(
    '/v1/storage/objects/:object_id/complete',
    {
      config: { operation: 'storage.objects.complete' },
      schema: {
        tags: ['storage'],
        summary: 'Check that the bytes arrived at their declared size and make the object ready',
        security: SECRET_KEY_SECURITY,
        params: ObjectParams,
        response: { 200: StorageObject, 409: ErrorBody, ...withNotFound },
      },
    },
    async (request) => storage.complete(request.principal!, request.params.object_id),
  );

  app.get(
    '/v1/storage/objects',
    {
      config: { operation: 'storage.objects.list' },
      schema: {
        tags: ['storage'],
        summary: 'Objects newest first, a page at a time',
        security: SECRET_KEY_SECURITY,
        querystring: ListQuery,
        response: { 200: ListResponse, ...ErrorResponses },
      },
    },
    async (request) => storage.list(request.principal!, request.query),
  );

  app.get(
    '/v1/storage/objects/:object_id',
    {
      config: { operation: 'storage.objects.read' },
      schema: {
        tags: ['storage'],
        summary: 'A ready object with a signed URL (answers Range requests)',
        security: SECRET_KEY_SECURITY,
        params: ObjectParams,
        querystring: ReadQuery,
        response: { 200: ReadResponse, 402: ErrorBody, 409: ErrorBody, ...withNotFound },
      },
    },
    async (request) => {
      const { costMicros, body } = await storage.read(
        request.principal!,
        request.params.object_id,
        request.query,
      );
      request.costMicros = costMicros;
      return body;
    },
  );

  app.delete(
    '/v1/storage/objects/:object_id',
    {
      config: { operation: 'storage.objects.delete' },
      schema: {
        tags: ['storage'],
        summary: 'Remove the bytes and the record; URLs already issued stop working',
        security: SECRET_KEY_SECURITY,
        params: ObjectParams,
        response: { 200: DeleteResponse, ...withNotFound },
      },
    },
    async (request) => storage.remove(request.principal!, request.params.object_id),
  );
};

/** The keys of removed objects in one MinIO notification; anything unrecognisable yields none. */
export function removedKeys(body: unknown): string[] {
  const records = (body as { Records?: unknown } | null)?.Records;
  if (!Array.isArray(records)) return [];
  return records.flatMap((record: { eventName?: unknown; s3?: { object?: { key?: unknown } } }) => {
    const key = record?.s3?.object?.key;
    if (typeof record?.eventName !== 'string' || !record.eventName.startsWith('s3:ObjectRemoved:')) return [];
    if (typeof key !== 'string') return [];
    try {
      // The record's key is form-encoded: '+' is a space, '%2B' a plus.
      return [decodeURIComponent(key.replace(/\+/g, ' '))];
    } catch {
      return [];
    }
  });
}

/**
 * MinIO's bucket notifications: an object removed behind the API's back (lifecycle expiry) loses its
 * record, so stored bytes stay true. MinIO retries any non-2xx answer forever and holds every later
 * event back meanwhile, so an event this endpoint cannot use is acknowledged, never refused; only a
 * failure a retry can cure (the database away) answers 500. Handling an event twice is harmless.
 */
export const storageEventRoutes: FastifyPluginAsyncTypebox<{ storage: StorageService }> = async (
  app,
  { storage },
) => {
  app.post(
    '/internal/minio/events',
    { config: { operation: 'storage.events' }, schema: { hide: true } },
    async (request) => {
      for (const key of removedKeys(request.body)) await storage.forgetRemovedKey(key);
      return { ok: true };
    },
  );
};
