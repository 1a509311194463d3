import { type TProperties, Type } from '@sinclair/typebox';
import { z } from 'zod';
import type { UserLimit } from '../../platform/admission.js';
import { displayName, postText } from '../../platform/identities.js';
import { Deleted, ListPageQuery, literalUnion, Page } from '../../platform/schemas.js';

/** The kinds of About content, each shown in a section of its own kind. */
export const ABOUT_KINDS = ['services', 'catalog', 'faqs'] as const;
export type AboutKind = (typeof ABOUT_KINDS)[number];
export const SECTION_STATUSES = ['published', 'draft'] as const;
export type SectionStatus = (typeof SECTION_STATUSES)[number];
export const CURRENCIES = ['coin', 'usd'] as const;

/** Items of one kind a profile may hold: a page of About content, not a shop's inventory. */
export const MAX_ITEMS = 100;
export const DEFAULT_PAGE = 20;
export const MAX_IMAGES = 10;
export const MAX_URL_LENGTH = 2_048;

/** A price as people write it: no sign, exponent or leading zeros; up to 12 digits and 6 decimals. */
export const PRICE_PATTERN = '^(0|[1-9][0-9]{0,11})(\\.[0-9]{1,6})?$';
/** https only, a host, and no credentials before it. */
export const IMAGE_URL_PATTERN = '^https://[^/?#\\s@]+([/?#]\\S*)?$';

/** Every About write of a user, per hour: an owner editing their page, not a script. */
export const ABOUT_WRITES = { name: 'about', limit: 300, windowSeconds: 3_600 } as const satisfies UserLimit;

const Id = (what: string) => Type.String({ pattern: '^[A-Za-z0-9_]{1,64}$', description: `The ${what} id` });
export const SectionParams = Type.Object({ id: Id('section') }, { additionalProperties: false });
export const ItemParams = Type.Object({ id: Id('item') }, { additionalProperties: false });

export const PageQuery = ListPageQuery(DEFAULT_PAGE);

/** A short name people read that may also be empty (clearing it). */
const optionalName = (maxLength: number, description: string) =>
  Type.Union([Type.Literal(''), displayName(maxLength, description)], {
    description: `${description}: empty, or 1-${maxLength} characters with no control, bidi-control or line-separator characters and no space at either end; default empty`,
  });

/** The new order of a list: exactly the ids it holds, each once. */
export const Order = (maxItems: number, what: string) =>
  Type.Object(
    {
      ids: Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        maxItems,
        uniqueItems: true,
        description: `Every one of the caller’s ${what} ids, each once, in the new display order`,
      }),
    },
    { additionalProperties: false },
  );

// ----- sections ----------------------------------------------------------------------------------

export const Section = Type.Object(
  {
    id: Type.String(),
    kind: literalUnion(ABOUT_KINDS),
    position: Type.Integer({
      minimum: 0,
      description:
        'Display order from 0. The owner’s list counts drafts; the public list counts published sections only',
    }),
    status: literalUnion(SECTION_STATUSES),
  },
  { additionalProperties: false },
);
export const SectionPage = Page(Section, 'In display order');
export const SectionCreate = Type.Object(
  {
    kind: literalUnion(ABOUT_KINDS, { description: 'One section per kind and profile' }),
    status: Type.Optional(literalUnion(SECTION_STATUSES, { description: 'Default draft' })),
  },
  { additionalProperties: false },
);
export const SectionUpdate = Type.Object(
  { status: literalUnion(SECTION_STATUSES, { description: 'published shows the section’s items' }) },
  { additionalProperties: false },
);
export const SectionOrder = Order(ABOUT_KINDS.length, 'section');
export const SectionDeleted = Deleted({}, 'The section is gone; its items stay, unlisted until it is back');

// ----- items -------------------------------------------------------------------------------------

/**
 * One kind of item: what the API shows (`item`, the spec's fields), the fields a create takes
 * (`required` ones and `optional` ones with their defaults) and what a PATCH may change (any of
 * them). The routes, store and service are written once over these.
 */
function itemKind<
  Item extends TProperties,
  Required extends TProperties,
  Optional extends TProperties,
>(kind: {
  noun: string;
  nouns: string;
  idPrefix: string;
  item: Item;
  required: Required;
  optional: Optional;
  defaults: { [K in keyof Optional]: ItemFields[string] };
}) {
  return {
    ...kind,
    Item: Type.Object({ id: Type.String(), ...kind.item }, { additionalProperties: false }),
    Create: Type.Object(
      { ...kind.required, ...Type.Partial(Type.Object(kind.optional)).properties },
      { additionalProperties: false },
    ),
    Update: Type.Partial(Type.Object({ ...kind.required, ...kind.optional }), {
      additionalProperties: false,
      minProperties: 1,
      description: 'The fields to change, at least one',
    }),
  };
}

const Name = displayName(100, 'What it is called');

export const ITEM_KINDS = {
  services: itemKind({
    noun: 'service',
    nouns: 'services',
    idPrefix: 'srv',
    item: {
      name: Type.String(),
      duration: Type.String({ description: 'How long it takes, as the owner writes it (e.g. 45 min)' }),
      category: Type.String(),
      accepts_bookings: Type.Boolean(),
    },
    required: { name: Name },
    optional: {
      duration: optionalName(50, 'How long it takes, as people read it (e.g. 45 min)'),
      category: optionalName(50, 'A group of services'),
      accepts_bookings: Type.Boolean({ description: 'Whether people may book it; default false' }),
    },
    defaults: { duration: '', category: '', accepts_bookings: false },
  }),
  catalog: itemKind({
    noun: 'catalog item',
    nouns: 'catalog items',
    idPrefix: 'cat',
    item: {
      name: Type.String(),
      department: Type.String(),
      price_amount: Type.String({ description: 'A decimal amount, as written' }),
      price_currency: literalUnion(CURRENCIES),
      in_stock: Type.Boolean(),
      images: Type.Array(Type.String()),
    },
    required: {
      name: Name,
      price_amount: Type.String({
        pattern: PRICE_PATTERN,
        description: `The price as a decimal string matching ${PRICE_PATTERN}: 0 or up to 12 digits without leading zeros, then up to 6 decimals after a dot (e.g. 0, 12.5, 1.123456); no sign or exponent. Kept as written`,
      }),
      price_currency: literalUnion(CURRENCIES, {
        description: 'coin or usd: shown with the price only; nothing is charged or converted',
      }),
    },
    optional: {
      department: optionalName(50, 'A group of items'),
      in_stock: Type.Boolean({ description: 'Default true' }),
      images: Type.Array(
        Type.String({
          format: 'uri',
          pattern: IMAGE_URL_PATTERN,
          maxLength: MAX_URL_LENGTH,
          description: `An https:// URL with a host and no credentials, up to ${MAX_URL_LENGTH} characters`,
        }),
        { maxItems: MAX_IMAGES, description: `0-${MAX_IMAGES} image URLs, in display order; default none` },
      ),
    },
    defaults: { department: '', in_stock: true, images: [] },
  }),
  faqs: itemKind({
    noun: 'FAQ entry',
    nouns: 'FAQ entries',
    idPrefix: 'faq',
    item: { question: Type.String(), answer: Type.String(), category: Type.String() },
    required: {
      question: displayName(300, 'The question, on one line'),
      answer: postText(2_000, 'The answer'),
    },
    optional: { category: optionalName(50, 'A group of questions') },
    defaults: { category: '' },
  }),
} as const;

/** The delete shape of every item. */
export const ItemDeleted = Deleted();

// ----- rows --------------------------------------------------------------------------------------

export const SectionRow = z.object({
  id: z.string(),
  kind: z.enum(ABOUT_KINDS),
  position: z.number(),
  status: z.enum(SECTION_STATUSES),
});
export type SectionRow = z.infer<typeof SectionRow>;

/** Each kind's fields as stored (the API's names and rules), checked again on every read. */
export const ITEM_FIELDS = {
  services: z.object({
    name: z.string(),
    duration: z.string(),
    category: z.string(),
    accepts_bookings: z.boolean(),
  }),
  catalog: z.object({
    name: z.string(),
    department: z.string(),
    price_amount: z.string().regex(new RegExp(PRICE_PATTERN)),
    price_currency: z.enum(CURRENCIES),
    in_stock: z.boolean(),
    images: z.array(z.string()),
  }),
  faqs: z.object({ question: z.string(), answer: z.string(), category: z.string() }),
} as const satisfies Record<AboutKind, z.ZodTypeAny>;

/** An item's row: its id, its place in its list and its kind's fields. */
export const itemRow = (kind: AboutKind) =>
  z.object({ id: z.string(), position: z.number(), fields: ITEM_FIELDS[kind] });
export type ItemRow = z.infer<ReturnType<typeof itemRow>>;
/** What a create or an update writes: fields by name. */
export type ItemFields = Record<string, string | boolean | readonly string[]>;
