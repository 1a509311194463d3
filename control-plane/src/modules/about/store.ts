import { sql } from 'slonik';
import { z } from 'zod';
import type { OrderedPosition } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import {
  type AboutKind,
  type ItemFields,
  type ItemRow,
  itemRow,
  SectionRow,
  type SectionStatus,
} from './schema.js';

/** One list in display order: a profile's sections (kind null), or its items of one kind. */
const listOf = (kind: AboutKind | null) =>
  kind === null
    ? { table: sql.identifier(['about_sections']), ofKind: sql.fragment`` }
    : { table: sql.identifier(['about_items']), ofKind: sql.fragment`and kind = ${kind}` };

/** In display order, after a cursor's position (`position` is the column or what a query names so). */
const after = (position: OrderedPosition | undefined) =>
  position ? sql.fragment`and (position, id) > (${position.position}, ${position.id})` : sql.fragment``;

const sectionColumns = sql.fragment`id, kind, position, status`;

const Id = z.object({ id: z.string() });
const Count = z.object({ count: z.number() });

/**
 * SQL of About content: sections and the items of each kind, by the profile's internal key. Takes
 * any connection or transaction; the writes expect the profile locked first (`lockProfile`).
 */
export function aboutStore(db: Db) {
  return {
    /**
     * Makes the profile's About writes take turns until the transaction ends, so that a create's
     * position and count and a reorder's set of ids hold. `no key update` leaves the rows that
     * reference the profile (whose inserts take key-share locks on it) free to be written meanwhile.
     */
    lockProfile: (profilePk: number) =>
      db.query(sql.unsafe`select 1 from profiles where pk = ${profilePk} for no key update`),

    // ----- sections ---------------------------------------------------------------------------

    /**
     * A profile's sections in display order. Published only: positions count the published ones
     * alone (0..n-1, what a visitor sees), and the cursor goes by them.
     */
    sections: (
      profilePk: number,
      options: { publishedOnly: boolean; after?: OrderedPosition; limit: number },
    ) =>
      db.any(sql.type(SectionRow)`
        select ${sectionColumns} from (
          select id, kind, status,
                 ${options.publishedOnly ? sql.fragment`(row_number() over (order by position, id) - 1)::int` : sql.fragment`position`} as position
          from about_sections
          where profile_pk = ${profilePk} ${options.publishedOnly ? sql.fragment`and status = 'published'` : sql.fragment``}
        ) s
        where true ${after(options.after)}
        order by position, id
        limit ${options.limit}`),

    sectionOfKind: (profilePk: number, kind: AboutKind) =>
      db.maybeOne(sql.type(SectionRow)`
        select ${sectionColumns} from about_sections where profile_pk = ${profilePk} and kind = ${kind}`),

    /** Adds a section after the profile's others. */
    insertSection: (section: {
      id: string;
      profilePk: number;
      kind: AboutKind;
      status: SectionStatus;
      at: Date;
    }) =>
      db.one(sql.type(SectionRow)`
        insert into about_sections (id, profile_pk, kind, position, status, created_at, updated_at)
        select ${section.id}, ${section.profilePk}, ${section.kind}, count(*), ${section.status},
               ${sql.timestamp(section.at)}, ${sql.timestamp(section.at)}
        from about_sections where profile_pk = ${section.profilePk}
        returning ${sectionColumns}`),

    setSectionStatus: (profilePk: number, id: string, status: SectionStatus, at: Date) =>
      db.maybeOne(sql.type(SectionRow)`
        update about_sections set status = ${status}, updated_at = ${sql.timestamp(at)}
        where id = ${id} and profile_pk = ${profilePk}
        returning ${sectionColumns}`),

    // ----- items ------------------------------------------------------------------------------

    /** A profile's items of one kind in display order; published only: none unless its section is. */
    items: (
      kind: AboutKind,
      profilePk: number,
      options: { publishedOnly: boolean; after?: OrderedPosition; limit: number },
    ): Promise<readonly ItemRow[]> =>
      db.any(sql.type(itemRow(kind))`
        select id, position, fields from about_items
        where profile_pk = ${profilePk} and kind = ${kind} ${after(options.after)}
          ${
            options.publishedOnly
              ? sql.fragment`and exists (
                  select 1 from about_sections s
                  where s.profile_pk = ${profilePk} and s.kind = ${kind} and s.status = 'published')`
              : sql.fragment``
          }
        order by position, id
        limit ${options.limit}`),

    countItems: (kind: AboutKind, profilePk: number) =>
      db.oneFirst(sql.type(Count)`
        select count(*)::int as count from about_items where profile_pk = ${profilePk} and kind = ${kind}`),

    /** Adds an item at `position` (the count of the profile's items of its kind: after them). */
    insertItem: (
      kind: AboutKind,
      item: { id: string; profilePk: number; position: number; fields: ItemFields; at: Date },
    ): Promise<ItemRow> =>
      db.one(sql.type(itemRow(kind))`
        insert into about_items (id, profile_pk, kind, position, fields, created_at, updated_at)
        values (${item.id}, ${item.profilePk}, ${kind}, ${item.position}, ${sql.jsonb(item.fields)},
                ${sql.timestamp(item.at)}, ${sql.timestamp(item.at)})
        returning id, position, fields`),

    /** Changes the fields given of the profile's item of a kind; null when it has no such item. */
    updateItem: (
      kind: AboutKind,
      profilePk: number,
      id: string,
      fields: ItemFields,
      at: Date,
    ): Promise<ItemRow | null> =>
      db.maybeOne(sql.type(itemRow(kind))`
        update about_items set fields = fields || ${sql.jsonb(fields)}, updated_at = ${sql.timestamp(at)}
        where id = ${id} and profile_pk = ${profilePk} and kind = ${kind}
        returning id, position, fields`),

    // ----- either list ------------------------------------------------------------------------

    /** The ids of a list, in display order. */
    ids: (kind: AboutKind | null, profilePk: number) => {
      const list = listOf(kind);
      return db.anyFirst(sql.type(Id)`
        select id from ${list.table} where profile_pk = ${profilePk} ${list.ofKind} order by position, id`);
    },

    /** Gives a list's rows the positions of their ids' order: the ids must be exactly the list's. */
    reorder: (kind: AboutKind | null, profilePk: number, ids: readonly string[]) => {
      const list = listOf(kind);
      return db.query(sql.unsafe`
        update ${list.table} t set position = o.ordinality - 1
        from unnest(${sql.array([...ids], 'text')}) with ordinality as o (id, ordinality)
        where t.id = o.id and t.profile_pk = ${profilePk} ${list.ofKind}`);
    },

    /** Removes a row of a list; the ones after it move up, so positions stay dense. */
    remove: async (kind: AboutKind | null, profilePk: number, id: string) => {
      const list = listOf(kind);
      return (
        (await db.oneFirst(sql.type(Count)`
          with gone as (
            delete from ${list.table} where id = ${id} and profile_pk = ${profilePk} ${list.ofKind}
            returning position
          ), moved as (
            update ${list.table} t set position = t.position - 1
            from gone where t.profile_pk = ${profilePk} ${list.ofKind} and t.position > gone.position
          )
          select count(*)::int as count from gone`)) > 0
      );
    },
  };
}
