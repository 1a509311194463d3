import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import type { UserLimit } from '../../platform/admission.js';
import { displayName } from '../../platform/identities.js';
import { Deleted, literalUnion, Page } from '../../platform/schemas.js';

export const MAX_UPLOAD_BYTES = 5 * 1024 ** 3;
/** Test keys' storage: declared sizes of pending uploads plus real sizes of ready objects, per app. */
export const TEST_QUOTA_BYTES = 1_000_000_000;
export const UPLOAD_URL_SECONDS = 900 as const;
export const PENDING_LIFETIME_MS = 86_400_000;
export const TEST_OBJECT_DAYS = 7;
export const MIN_READ_URL_SECONDS = 60;
export const MAX_READ_URL_SECONDS = 604_800;
export const DEFAULT_READ_URL_SECONDS = 3_600;
export const MAX_METADATA_PAIRS = 20;

const ALLOWED_EXACT = new Set([
  'video/mp4',
  'video/webm',
  'video/quicktime',
  'video/x-matroska',
  'application/pdf',
  'application/json',
  'text/csv',
  'text/plain',
  'text/vtt',
  'application/zip',
]);

/**
 * Images, MP4/WebM/QuickTime/Matroska video, audio, PDF, JSON, CSV, plain text, WebVTT and ZIP.
 * SVG is an image type that runs scripts in a browser, so it is refused like HTML.
 */
export function isAllowedContentType(contentType: string): boolean {
  if (contentType === 'image/svg+xml') return false;
  return ALLOWED_EXACT.has(contentType) || /^(image|audio)\/[a-z0-9.+-]+$/.test(contentType);
}

/** Names that browsers would treat as HTML or SVG, whatever type they are declared with. */
export const ACTIVE_DOCUMENT_NAME = /\.(html?|xhtml|xht|shtml|svgz?|mht(ml)?)$/i;

/** Where a comment that starts `text` ends, as a browser's HTML parser ends it; -1 if it never does. */
function commentEnd(text: string): number {
  // `<!-->` and `<!--->` are empty comments, closed at once.
  if (text.startsWith('<!-->')) return 5;
  if (text.startsWith('<!--->')) return 6;
  const ends = [text.indexOf('-->', 4), text.indexOf('--!>', 4)].filter((at) => at !== -1);
  if (ends.length === 0) return -1;
  const at = Math.min(...ends);
  return at + (text.startsWith('--!>', at) ? 4 : 3);
}

/**
 * The first bytes of an HTML or SVG document (after a BOM, white space, an XML prolog or comments).
 * Comments are skipped by a scan, each ending where a browser ends it: a regex with a repeated lazy
 * comment took time doubling with each comment (a minute for 30 `<!---->`).
 */
export function looksLikeActiveDocument(head: Buffer): boolean {
  let text = head
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart()
    .toLowerCase();
  const prolog = /^<\?xml[^>]*>/.exec(text);
  if (prolog) text = text.slice(prolog[0].length).trimStart();
  while (text.startsWith('<!--')) {
    const end = commentEnd(text);
    if (end === -1) return false;
    text = text.slice(end).trimStart();
  }
  return /^<(!doctype\s+(html|svg)|html|svg|head|body|script|iframe)[\s>/]/.test(text);
}

/** A user's upload: a video for a moment, at most 2 GiB. */
export const USER_UPLOAD_MAX_BYTES = 2 * 1024 ** 3;

/** A user's uploads per hour: reserving one and completing it count one each. */
export const USER_UPLOADS = {
  name: 'uploads',
  limit: 200,
  windowSeconds: 3_600,
} as const satisfies UserLimit;

export const StorageObjectRow = z.object({
  id: z.string(),
  app_id: z.string(),
  mode: z.enum(['live', 'test']),
  name: z.string(),
  content_type: z.string(),
  declared_size: z.number().int(),
  size_bytes: z.number().int().nullable(),
  metadata: z.record(z.string()),
  status: z.enum(['pending', 'ready']),
  storage_key: z.string(),
  owner_user_id: z.string().nullable(),
  created_at: z.date(),
  completed_at: z.date().nullable(),
});
export type StorageObjectRow = z.infer<typeof StorageObjectRow>;

export const StorageObject = Type.Object(
  {
    id: Type.String(),
    status: literalUnion(['pending', 'ready'] as const),
    name: Type.String(),
    content_type: Type.String(),
    size_bytes: Type.Integer({ description: 'Declared while pending; the real stored size once ready' }),
    metadata: Type.Record(Type.String(), Type.String()),
    created_at: Type.String({ format: 'date-time' }),
    completed_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { additionalProperties: false },
);

export const UploadRequest = Type.Object(
  {
    name: displayName(255, 'The file name, without "/" or "\\"', { pattern: '^[^/\\\\]+$' }),
    content_type: Type.String({
      pattern: '^[a-z0-9.+-]+/[a-z0-9.+-]+$',
      maxLength: 127,
      description: 'Lowercase type/subtype, signed into the upload URL: the PUT must send exactly it',
    }),
    size_bytes: Type.Integer({ minimum: 1, maximum: MAX_UPLOAD_BYTES, description: 'Up to 5 GiB' }),
    metadata: Type.Optional(
      // Written out: TypeBox's Record would not close the object to keys outside the pattern.
      Type.Unsafe<Record<string, string>>({
        type: 'object',
        patternProperties: { '^[A-Za-z0-9_-]{1,64}$': { type: 'string', maxLength: 512 } },
        additionalProperties: false,
        maxProperties: MAX_METADATA_PAIRS,
        description:
          'Up to 20 string pairs: keys of 1-64 letters, digits, _ and -, values up to 512 characters',
      }),
    ),
  },
  { additionalProperties: false },
);

export const UploadResponse = Type.Object(
  {
    object: StorageObject,
    upload_url: Type.String(),
    upload_method: Type.Literal('PUT'),
    upload_headers: Type.Object(
      {
        'Content-Type': Type.String(),
        'Content-Length': Type.String({ description: 'size_bytes: the URL takes exactly this many bytes' }),
        'If-None-Match': Type.Literal('*', { description: 'The URL writes once: it never replaces bytes' }),
      },
      {
        additionalProperties: false,
        description: 'Send exactly these headers with the PUT (HTTP clients set Content-Length themselves)',
      },
    ),
    expires_in: Type.Literal(UPLOAD_URL_SECONDS),
  },
  { additionalProperties: false },
);

export const ObjectParams = Type.Object(
  { object_id: Type.String({ maxLength: 64 }) },
  { additionalProperties: false },
);

export const ReadQuery = Type.Object(
  {
    expires_in: Type.Integer({
      minimum: MIN_READ_URL_SECONDS,
      maximum: MAX_READ_URL_SECONDS,
      default: DEFAULT_READ_URL_SECONDS,
    }),
    download: Type.Boolean({
      default: false,
      description: 'true makes browsers save the file rather than play it',
    }),
  },
  { additionalProperties: false },
);

export const ReadResponse = Type.Object(
  { ...StorageObject.properties, url: Type.String(), expires_in: Type.Integer() },
  { additionalProperties: false },
);

export const ListQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 200, default: 50 }),
    cursor: Type.Optional(Type.String({ maxLength: 200, description: 'next_cursor of the previous page' })),
    status: Type.Optional(literalUnion(['pending', 'ready'] as const)),
  },
  { additionalProperties: false },
);

export const ListResponse = Page(StorageObject, 'Newest first');

export const DeleteResponse = Deleted();
