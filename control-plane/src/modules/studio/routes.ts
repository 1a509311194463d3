import { PUBLIC_DATA_WRITE as WRITE } from '../../platform/price-catalogue.js';
import { route } from '../../platform/route.js';
import {
  StudioAsset,
  StudioCreate,
  StudioDeleted,
  StudioListQuery,
  StudioPage,
  StudioParams,
  StudioUpdate,
} from './schema.js';
import type { StudioService } from './service.js';

export const studioRoutes = (studio: StudioService) => [
  route({
    operationId: 'studio.create',
    method: 'POST',
    url: '/v1/studio',
    auth: 'secret-key',
    tags: ['public data'],
    summary:
      'Add a photo or video: an https URL of the app’s (kept as given, never fetched) or a ready storage object (checked with ffprobe, thumbnailed, served at a media URL)',
    body: StudioCreate,
    response: StudioAsset,
    status: 201,
    errors: [404, 409],
    price: WRITE,
    handler: ({ caller, body, tx }) => studio.create(caller, body, tx),
  }),
  route({
    operationId: 'studio.list',
    method: 'GET',
    url: '/v1/studio',
    auth: 'secret-key',
    tags: ['public data'],
    summary: 'The app’s studio assets newest first, of one kind or both, a page at a time',
    query: StudioListQuery,
    response: StudioPage,
    handler: ({ caller, query }) => studio.list(caller, query),
  }),
  route({
    operationId: 'studio.read',
    method: 'GET',
    url: '/v1/studio/:id',
    auth: 'secret-key',
    tags: ['public data'],
    summary: 'One studio asset',
    params: StudioParams,
    response: StudioAsset,
    errors: [404],
    handler: ({ caller, params }) => studio.get(caller, params.id),
  }),
  route({
    operationId: 'studio.update',
    method: 'PATCH',
    url: '/v1/studio/:id',
    auth: 'secret-key',
    tags: ['public data'],
    summary:
      'Change an asset’s title or tags, and for a URL asset its thumbnail_url, width or height (a storage object’s are read from the file)',
    params: StudioParams,
    body: StudioUpdate,
    response: StudioAsset,
    errors: [404],
    price: WRITE,
    handler: ({ caller, params, body, tx }) => studio.update(caller, params.id, body, tx),
  }),
  route({
    operationId: 'studio.delete',
    method: 'DELETE',
    url: '/v1/studio/:id',
    auth: 'secret-key',
    tags: ['public data'],
    summary:
      'Delete an asset (a soft delete): a storage object’s media URLs answer 404 at once, and the object may then be removed',
    params: StudioParams,
    response: StudioDeleted,
    errors: [404],
    price: WRITE,
    handler: ({ caller, params, tx }) => studio.delete(caller, params.id, tx),
  }),
];
