import { sql } from 'slonik';
import { type SandboxPart, sandboxIds } from '../../platform/sandbox.js';
import type { Transaction } from '../../platform/transaction.js';
import type { AboutKind, SectionStatus } from './schema.js';

/**
 * The test mode's About content: a few sandbox profiles (seeded by the social part, user ids
 * `sandbox-<name>`) with sections, services, catalog items and FAQ entries, the same in every app.
 * Some sections are drafts and one kind has items but no section, so that an app sees every case
 * of the visitor's lists: shown, hidden while a draft, hidden without a section.
 */

type Service = readonly [name: string, duration: string, category: string, acceptsBookings: boolean];
type CatalogItem = readonly [
  name: string,
  department: string,
  priceAmount: string,
  priceCurrency: 'coin' | 'usd',
  inStock: boolean,
  images: readonly string[],
];
type Faq = readonly [question: string, answer: string, category: string];

interface AboutFixture {
  /** In display order. */
  sections: readonly (readonly [AboutKind, SectionStatus])[];
  services?: readonly Service[];
  catalog?: readonly CatalogItem[];
  faqs?: readonly Faq[];
}

const image = (profile: string, file: string) => `https://images.example.com/sandbox/${profile}/${file}.jpg`;

/** By sandbox name (the user id is `sandbox-<name>`). */
export const ABOUT_FIXTURES: Readonly<Record<string, AboutFixture>> = {
  // A bakery: its catalog and FAQs shown, its services still a draft.
  lily: {
    sections: [
      ['catalog', 'published'],
      ['faqs', 'published'],
      ['services', 'draft'],
    ],
    catalog: [
      ['Sourdough loaf', 'Bread', '6.50', 'usd', true, [image('lily', 'sourdough'), image('lily', 'crumb')]],
      ['Butter croissant', 'Pastry', '2.75', 'usd', true, [image('lily', 'croissant')]],
      ['Cinnamon roll', 'Pastry', '3.25', 'usd', false, []],
      ['Birthday cake (8 in)', 'Cakes', '35', 'usd', true, [image('lily', 'cake')]],
    ],
    services: [['Custom cake consultation', '30 min', 'Cakes', true]],
    faqs: [
      ['Do you bake gluten-free bread?', 'Yes, on Fridays: order by Wednesday.', 'Products'],
      ['How early should I order a cake?', 'Three days ahead; a week for tiered cakes.', 'Orders'],
      ['Do you deliver?', 'Within 5 km of the shop, from 8 am to noon.', 'Orders'],
    ],
  },
  // A café: everything shown, in Spanish.
  'cafe-del-sol': {
    sections: [
      ['catalog', 'published'],
      ['services', 'published'],
      ['faqs', 'published'],
    ],
    catalog: [
      ['Café con leche', 'Bebidas', '1.80', 'usd', true, [image('cafe-del-sol', 'cafe-con-leche')]],
      ['Tostada con tomate', 'Desayunos', '2.50', 'usd', true, []],
      ['Tarta de queso', 'Postres', '4.20', 'usd', true, [image('cafe-del-sol', 'tarta')]],
      ['Churros con chocolate', 'Desayunos', '3.90', 'usd', false, []],
    ],
    services: [
      ['Reserva de mesa', '', 'Reservas', true],
      ['Catering para eventos', 'Medio día', 'Eventos', true],
    ],
    faqs: [
      ['¿Tenéis leche sin lactosa?', 'Sí, y también de avena y de soja.', 'Carta'],
      ['¿Hay wifi?', 'Sí: pide la contraseña en la barra.', 'Local'],
    ],
  },
  // A chef: services shown, FAQs a draft, a catalog with no section at all.
  javier: {
    sections: [
      ['services', 'published'],
      ['faqs', 'draft'],
    ],
    services: [
      ['Clase de cocina', '2 h', 'Clases', true],
      ['Cena privada', '3 h', 'Eventos', true],
      ['Menú semanal', '', 'Asesoría', false],
    ],
    catalog: [['Libro: Cocina de mercado', 'Libros', '24.90', 'usd', true, [image('javier', 'libro')]]],
    faqs: [['¿Cocinas para alergias?', 'Sí, avísame al reservar.', 'Reservas']],
  },
  // A musician: merch first (in coins and dollars), then lessons; FAQs a draft.
  marcus: {
    sections: [
      ['catalog', 'published'],
      ['services', 'published'],
      ['faqs', 'draft'],
    ],
    catalog: [
      [
        'Tour T-shirt',
        'Merch',
        '500',
        'coin',
        true,
        [image('marcus', 'shirt-front'), image('marcus', 'shirt-back')],
      ],
      ['Signed vinyl', 'Music', '29.99', 'usd', true, [image('marcus', 'vinyl')]],
      ['Backstage pass', 'Experiences', '1200', 'coin', false, []],
    ],
    services: [
      ['Guitar lesson', '60 min', 'Lessons', true],
      ['Studio session', '3 h', 'Recording', true],
      ['Wedding set', '2 h', 'Live', false],
    ],
    faqs: [['Do you teach beginners?', 'Yes, from the very first chord.', 'Lessons']],
  },
};

/** Each item of a fixture as the API names its fields, with its kind. */
function itemsOf(fixture: AboutFixture) {
  return [
    ...(fixture.services ?? []).map(([name, duration, category, acceptsBookings]) => ({
      kind: 'services' as const,
      fields: { name, duration, category, accepts_bookings: acceptsBookings },
    })),
    ...(fixture.catalog ?? []).map(([name, department, amount, currency, inStock, images]) => ({
      kind: 'catalog' as const,
      fields: {
        name,
        department,
        price_amount: amount,
        price_currency: currency,
        in_stock: inStock,
        images,
      },
    })),
    ...(fixture.faqs ?? []).map(([question, answer, category]) => ({
      kind: 'faqs' as const,
      fields: { question, answer, category },
    })),
  ];
}

/** Id prefixes as newId's callers use them; then `_sbx_`, which newId's base62 never holds. */
const PREFIXES: Record<AboutKind | 'sections', string> = {
  sections: 'sec',
  services: 'srv',
  catalog: 'cat',
  faqs: 'faq',
};

/**
 * Seeds the About content of an app's sandbox in two statements, after the profiles. Ids are unique
 * across apps (a hash of the app id tells them apart) and numbered in the fixtures' order.
 */
async function seedAbout(tx: Transaction, appId: string, at: Date): Promise<void> {
  const ids = sandboxIds(appId);
  const numbers = new Map<string, number>();
  const id = (kind: keyof typeof PREFIXES) => {
    const number = (numbers.get(kind) ?? 0) + 1;
    numbers.set(kind, number);
    return ids(PREFIXES[kind], number, 3);
  };
  const fixtures = Object.entries(ABOUT_FIXTURES).map(([name, fixture]) => ({
    userId: `sandbox-${name}`,
    fixture,
  }));
  // Each list's positions count from 0 in the fixture's order.
  const sections = fixtures.flatMap(({ userId, fixture }) =>
    fixture.sections.map(([kind, status], position) => [id('sections'), userId, kind, position, status]),
  );
  const items = fixtures.flatMap(({ userId, fixture }) => {
    const positions = new Map<AboutKind, number>();
    return itemsOf(fixture).map(({ kind, fields }) => {
      const position = positions.get(kind) ?? 0;
      positions.set(kind, position + 1);
      return [id(kind), userId, kind, position, JSON.stringify(fields)];
    });
  });
  const seededAt = sql.timestamp(at);
  const owner = sql.fragment`
    join profiles p on p.app_id = ${appId} and p.mode = 'test' and p.user_id = f.user_id`;

  await tx.query(sql.unsafe`
    insert into about_sections (id, profile_pk, kind, position, status, created_at, updated_at)
    select f.id, p.pk, f.kind, f.position, f.status, ${seededAt}, ${seededAt}
    from ${sql.unnest(sections, ['text', 'text', 'text', 'int4', 'text'])} as f (id, user_id, kind, position, status)
    ${owner}`);
  await tx.query(sql.unsafe`
    insert into about_items (id, profile_pk, kind, position, fields, created_at, updated_at)
    select f.id, p.pk, f.kind, f.position, f.fields, ${seededAt}, ${seededAt}
    from ${sql.unnest(items, ['text', 'text', 'text', 'int4', 'jsonb'])} as f (id, user_id, kind, position, fields)
    ${owner}`);
}

/** Sections, services, catalog items and FAQ entries of a few sandbox profiles; after `social`. */
export const aboutSandbox: SandboxPart = { name: 'about', seed: seedAbout };
