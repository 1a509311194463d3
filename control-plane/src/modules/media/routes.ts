import { route } from '../../platform/route.js';
import { MediaBytes, MediaParams } from './schema.js';
import type { MediaService } from './service.js';

/** The media of moments and studio assets, public by their URL: `<video src>` and `<img src>` work. */
export const mediaRoutes = (media: MediaService) =>
  (['file', 'thumbnail'] as const).map((variant) =>
    route({
      operationId: variant === 'file' ? 'media.read' : 'media.thumbnail',
      method: 'GET',
      url: variant === 'file' ? '/media/:id' : '/media/:id/thumbnail',
      auth: 'public',
      tags: ['media'],
      summary:
        variant === 'file'
          ? 'A moment’s video or a studio asset’s file, without a key (answers Range requests)'
          : 'Its thumbnail: a JPEG at most 640 pixels a side, without a key',
      params: MediaParams,
      response: MediaBytes,
      otherResponses: { 206: MediaBytes },
      // A moment's video or a studio asset's own type; thumbnails are JPEG.
      produces: variant === 'file' ? '*/*' : 'image/jpeg',
      errors: [404, 429],
      // Players ask with GET and a Range; a HEAD would read the whole file for nothing.
      head: false,
      handler: async ({ params, headers, reply, client }) => {
        const range = typeof headers.range === 'string' ? headers.range : undefined;
        const served = await media.serve(params.id, variant, range, client.address);
        reply.status(served.status);
        for (const [name, value] of Object.entries(served.headers)) reply.header(name, value);
        return served.body;
      },
    }),
  );
