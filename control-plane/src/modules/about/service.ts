import type { DatabasePool } from 'slonik';
import type { Principal, UserPrincipal } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import type { Cursors, OrderedPosition } from '../../platform/cursors.js';
import { errors, ServiceError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Sandbox } from '../../platform/sandbox.js';
import type { Transaction } from '../../platform/transaction.js';
import type { SocialService } from '../social/service.js';
import { aboutSandbox } from './sandbox.js';
import {
  type AboutKind,
  ITEM_KINDS,
  type ItemFields,
  type ItemRow,
  MAX_ITEMS,
  type SectionRow,
  type SectionStatus,
} from './schema.js';
import { aboutStore } from './store.js';

interface PageQuery {
  limit: number;
  cursor?: string;
}

/** An item as the API shows it: its id and fields, not its position (the list's order says it). */
const presentItem = (row: ItemRow) => ({ id: row.id, ...row.fields });
const presentSection = (row: SectionRow) => row;

/** A capitalized noun for messages: "Service srv_… not found". */
const Noun = (kind: AboutKind) => ITEM_KINDS[kind].noun.replace(/^./, (first) => first.toUpperCase());

const sectionExists = (kind: AboutKind) =>
  new ServiceError('conflict', `The profile already has a ${kind} section: publish or unpublish it instead`, {
    code: 'SECTION_EXISTS',
  });
const itemLimit = (kind: AboutKind) =>
  new ServiceError(
    'conflict',
    `A profile holds at most ${MAX_ITEMS} ${ITEM_KINDS[kind].nouns}: delete one before adding another`,
    { code: 'ITEM_LIMIT_REACHED' },
  );

/** A new order must name exactly the ids of the list, each once (the schema refuses repeats). */
function checkOrder(current: readonly string[], ids: readonly string[], what: string): void {
  const known = new Set(current);
  const sent = new Set(ids);
  const unknown = ids.filter((id) => !known.has(id));
  const missing = current.filter((id) => !sent.has(id));
  if (unknown.length === 0 && missing.length === 0) return;
  const problems = [
    ...(unknown.length > 0 ? [`not theirs: ${unknown.join(', ')}`] : []),
    ...(missing.length > 0 ? [`left out: ${missing.join(', ')}`] : []),
  ];
  throw errors.invalidField(
    'body',
    'ids',
    `must name each of the caller’s ${what} exactly once (${problems.join('; ')})`,
  );
}

/** What the About service is made of. */
export interface AboutDeps {
  /** Reads outside a write's transaction (the lists). */
  pool: DatabasePool;
  /** Creation and update times. */
  clock: Clock;
  /** The lists' cursors, in display order. */
  cursors: Cursors;
  /** Profiles: the call's scope (its sandbox seeded), the caller's own, one by username. */
  social: SocialService;
  /** The test mode's sandbox, to which the service adds its part. */
  sandbox: Sandbox;
}

/**
 * About content: a profile's sections (one per kind) and its services, catalog items and FAQ
 * entries, kept by the profile's owner and read by the app's server. The visitor's lists show a
 * kind's items only while its section is published. Profiles come from the social service (its
 * scope seeds the test mode's sandbox, About content included); each write locks the owner's profile
 * first, so positions stay dense 0..n-1 and the per-kind limit holds under concurrent writes.
 */
export function createAboutService(deps: AboutDeps) {
  deps.sandbox.register(aboutSandbox);
  const store = aboutStore(deps.pool);

  /** The user's profile for an About write, locked for the write's transaction. */
  async function lockedProfile(user: UserPrincipal, tx: Transaction, missing?: () => Error) {
    const profile = await deps.social.ownProfile(user, tx, missing);
    await aboutStore(tx).lockProfile(profile.pk);
    return profile;
  }

  /** A visitor's view: the app's profile by username (any case), or a 404. */
  async function profileFor(principal: Principal, username: string) {
    return deps.social.profileNamed(await deps.social.scope(principal), username);
  }

  const positionOf = (query: PageQuery): { after?: OrderedPosition } =>
    query.cursor === undefined ? {} : { after: deps.cursors.decodeOrdered(query.cursor) };

  async function sectionPage(profilePk: number, publishedOnly: boolean, query: PageQuery, db = store) {
    const rows = await db.sections(profilePk, {
      publishedOnly,
      ...positionOf(query),
      limit: query.limit + 1,
    });
    return deps.cursors.pageOrdered(rows, query.limit, presentSection);
  }

  async function itemPage(
    kind: AboutKind,
    profilePk: number,
    publishedOnly: boolean,
    query: PageQuery,
    db = store,
  ) {
    const rows = await db.items(kind, profilePk, {
      publishedOnly,
      ...positionOf(query),
      limit: query.limit + 1,
    });
    return deps.cursors.pageOrdered(rows, query.limit, presentItem);
  }

  /** A whole list after a reorder: at most MAX_ITEMS rows, one page. */
  const everything = { limit: MAX_ITEMS };

  return {
    // ----- the app's server -------------------------------------------------------------------

    /** The profile's published sections, positions counted among them. */
    publicSections: async (principal: Principal, username: string, query: PageQuery) =>
      sectionPage((await profileFor(principal, username)).pk, true, query),

    /** The profile's items of a kind; none while the kind's section is a draft or missing. */
    publicItems: async (principal: Principal, kind: AboutKind, username: string, query: PageQuery) =>
      itemPage(kind, (await profileFor(principal, username)).pk, true, query),

    // ----- the owner: sections ----------------------------------------------------------------

    mySections: async (user: UserPrincipal, query: PageQuery) =>
      sectionPage((await deps.social.ownProfile(user)).pk, false, query),

    createSection: async (
      user: UserPrincipal,
      input: { kind: AboutKind; status?: SectionStatus },
      tx: Transaction,
    ) => {
      const profile = await lockedProfile(user, tx);
      const db = aboutStore(tx);
      if (await db.sectionOfKind(profile.pk, input.kind)) throw sectionExists(input.kind);
      return presentSection(
        await db.insertSection({
          id: newId('sec'),
          profilePk: profile.pk,
          kind: input.kind,
          status: input.status ?? 'draft',
          at: deps.clock.now(),
        }),
      );
    },

    setSectionStatus: async (user: UserPrincipal, id: string, status: SectionStatus, tx: Transaction) => {
      const profile = await lockedProfile(user, tx);
      const section = await aboutStore(tx).setSectionStatus(profile.pk, id, status, deps.clock.now());
      if (!section) throw errors.notFound(`Section ${id}`);
      return presentSection(section);
    },

    deleteSection: async (user: UserPrincipal, id: string, tx: Transaction) => {
      const profile = await lockedProfile(user, tx, () => errors.notFound(`Section ${id}`));
      if (!(await aboutStore(tx).remove(null, profile.pk, id))) throw errors.notFound(`Section ${id}`);
      return { ok: true as const, id };
    },

    orderSections: async (user: UserPrincipal, ids: readonly string[], tx: Transaction) => {
      const profile = await lockedProfile(user, tx);
      const db = aboutStore(tx);
      checkOrder(await db.ids(null, profile.pk), ids, 'sections');
      await db.reorder(null, profile.pk, ids);
      return sectionPage(profile.pk, false, everything, db);
    },

    // ----- the owner: items -------------------------------------------------------------------

    myItems: async (user: UserPrincipal, kind: AboutKind, query: PageQuery) =>
      itemPage(kind, (await deps.social.ownProfile(user)).pk, false, query),

    /** Adds an item after the others of its kind; the fields left out take their defaults. */
    createItem: async (user: UserPrincipal, kind: AboutKind, input: ItemFields, tx: Transaction) => {
      const profile = await lockedProfile(user, tx);
      const db = aboutStore(tx);
      const count = await db.countItems(kind, profile.pk);
      if (count >= MAX_ITEMS) throw itemLimit(kind);
      const described = ITEM_KINDS[kind];
      return presentItem(
        await db.insertItem(kind, {
          id: newId(described.idPrefix),
          profilePk: profile.pk,
          position: count,
          fields: { ...described.defaults, ...input },
          at: deps.clock.now(),
        }),
      );
    },

    updateItem: async (
      user: UserPrincipal,
      kind: AboutKind,
      id: string,
      input: ItemFields,
      tx: Transaction,
    ) => {
      const profile = await lockedProfile(user, tx);
      const item = await aboutStore(tx).updateItem(kind, profile.pk, id, input, deps.clock.now());
      if (!item) throw errors.notFound(`${Noun(kind)} ${id}`);
      return presentItem(item);
    },

    deleteItem: async (user: UserPrincipal, kind: AboutKind, id: string, tx: Transaction) => {
      const profile = await lockedProfile(user, tx, () => errors.notFound(`${Noun(kind)} ${id}`));
      if (!(await aboutStore(tx).remove(kind, profile.pk, id))) throw errors.notFound(`${Noun(kind)} ${id}`);
      return { ok: true as const, id };
    },

    orderItems: async (user: UserPrincipal, kind: AboutKind, ids: readonly string[], tx: Transaction) => {
      const profile = await lockedProfile(user, tx);
      const db = aboutStore(tx);
      checkOrder(await db.ids(kind, profile.pk), ids, ITEM_KINDS[kind].nouns);
      await db.reorder(kind, profile.pk, ids);
      return itemPage(kind, profile.pk, false, everything, db);
    },
  };
}

export type AboutService = ReturnType<typeof createAboutService>;
