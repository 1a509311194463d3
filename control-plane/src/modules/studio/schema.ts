import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import { displayName } from '../../platform/identities.js';
import { Deleted, literalUnion, Page } from '../../platform/schemas.js';
import { PageQuery } from '../social/schema.js';

export const STUDIO_KINDS = ['photo', 'video'] as const;
export type StudioKind = (typeof STUDIO_KINDS)[number];

export const MAX_TITLE_CHARACTERS = 200;
export const MAX_TAGS = 20;
export const MAX_TAG_CHARACTERS = 50;
/** What browsers and CDNs reliably take. */
export const MAX_URL_LENGTH = 2_048;
/** Pixels a side the caller may declare for an asset at a URL of theirs (nothing reads it to check). */
export const MAX_DECLARED_SIDE = 100_000;

/** What POST /v1/storage/uploads answered as `object.id`. */
export const OBJECT_ID_PATTERN = /^obj_[A-Za-z0-9]{1,64}$/;

const Title = Type.Union([Type.Literal(''), displayName(MAX_TITLE_CHARACTERS, 'The title')], {
  description: `Empty, or 1-${MAX_TITLE_CHARACTERS} characters with no control, bidi-control or line-separator characters and no space at either end`,
});

const Tags = Type.Array(displayName(MAX_TAG_CHARACTERS, 'A tag'), {
  maxItems: MAX_TAGS,
  uniqueItems: true,
  description: `0-${MAX_TAGS} distinct tags, each 1-${MAX_TAG_CHARACTERS} characters, kept in the order given`,
});

const HttpsUrl = (description: string) =>
  Type.String({
    minLength: 1,
    maxLength: MAX_URL_LENGTH,
    description: `${description}: an https:// URL with a host and no credentials, up to ${MAX_URL_LENGTH} characters, kept as given`,
  });

const Side = Type.Integer({
  minimum: 1,
  maximum: MAX_DECLARED_SIDE,
  description: `Pixels, 1-${MAX_DECLARED_SIDE}, as declared for an asset at a URL; read from the file for a storage object (sending it then is a 422)`,
});

export const StudioParams = Type.Object(
  { id: Type.String({ pattern: '^[A-Za-z0-9_]{1,64}$', description: 'The asset id' }) },
  { additionalProperties: false },
);

export const StudioAsset = Type.Object(
  {
    id: Type.String(),
    kind: literalUnion(STUDIO_KINDS),
    url: Type.String({
      format: 'uri',
      description:
        'The https URL given, or for a storage object the media URL served without a key (answers Range requests)',
    }),
    thumbnail_url: Type.Union([Type.String({ format: 'uri' }), Type.Null()], {
      description:
        'For a storage object: a JPEG at most 640 pixels a side, served without a key. For a URL: the https URL given, or null',
    }),
    title: Type.String({ description: 'Empty when none was given' }),
    width: Type.Union([Type.Integer(), Type.Null()], {
      description:
        'Pixels: read from the file for a storage object (as shown, upright); as given for a URL, or null',
    }),
    height: Type.Union([Type.Integer(), Type.Null()], {
      description:
        'Pixels: read from the file for a storage object (as shown, upright); as given for a URL, or null',
    }),
    tags: Type.Array(Type.String()),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time', description: 'The last PATCH, or created_at' }),
  },
  { additionalProperties: false },
);

export const StudioCreate = Type.Object(
  {
    kind: literalUnion(STUDIO_KINDS, {
      description: 'photo or video: a storage object must be one (checked with ffprobe)',
    }),
    url: Type.String({
      minLength: 1,
      maxLength: MAX_URL_LENGTH,
      description:
        'An https URL of the app’s own (kept as given; never fetched), or the id of a ready storage object of the app (obj_…, as POST /v1/storage/uploads answered it): checked with ffprobe, served at a media URL with a thumbnail',
    }),
    thumbnail_url: Type.Optional(HttpsUrl('For a URL only; default null')),
    title: Type.Optional(Title),
    width: Type.Optional(Side),
    height: Type.Optional(Side),
    tags: Type.Optional(Tags),
  },
  { additionalProperties: false },
);

export const StudioUpdate = Type.Object(
  {
    title: Type.Optional(Title),
    tags: Type.Optional(Tags),
    thumbnail_url: Type.Optional(
      Type.Union([HttpsUrl('For a URL asset only'), Type.Null()], { description: 'null removes it' }),
    ),
    width: Type.Optional(Type.Union([Side, Type.Null()], { description: 'null removes it' })),
    height: Type.Optional(Type.Union([Side, Type.Null()], { description: 'null removes it' })),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description:
      'The fields to change, at least one; thumbnail_url, width and height of a URL asset only (a storage object’s are read from the file)',
  },
);

export const StudioListQuery = Type.Object(
  {
    kind: Type.Optional(literalUnion(STUDIO_KINDS, { description: 'Only photos or only videos' })),
    ...PageQuery.properties,
  },
  { additionalProperties: false },
);

export const StudioPage = Page(StudioAsset, 'Newest first; deleted assets never appear');

export const StudioDeleted = Deleted();

export const StudioRow = z.object({
  id: z.string(),
  kind: z.enum(STUDIO_KINDS),
  media_id: z.string().nullable(),
  url: z.string().nullable(),
  thumbnail_url: z.string().nullable(),
  title: z.string(),
  width: z.number().nullable(),
  height: z.number().nullable(),
  tags: z.array(z.string()),
  created_at: z.date(),
  updated_at: z.date(),
});
export type StudioRow = z.infer<typeof StudioRow>;
