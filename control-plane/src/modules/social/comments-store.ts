import { sql } from 'slonik';
import type { Position } from '../../platform/cursors.js';
import { newId } from '../../platform/ids.js';
import { DeliveriesMade, type EventInStatement, eventPartsIfAny } from '../../platform/outbox.js';
import type { Db } from '../../platform/transaction.js';
import { CommentRow } from './schema.js';
import { after } from './store.js';

/** A comment as the API shows it, its parent named by `parentField` (`buzz_id`, `moment_id`). */
export const commentPresenter =
  <F extends string>(parentField: F) =>
  (row: CommentRow) =>
    ({
      id: row.id,
      [parentField]: row.parent_id,
      text: row.text,
      created_at: row.created_at.toISOString(),
      author_id: row.author_id,
      author_username: row.author_username,
    }) as {
      id: string;
      text: string;
      created_at: string;
      author_id: string;
      author_username: string;
    } & Record<F, string>;

/** What comments hang on: its table, its comments' table and key, and the counter kept on it. */
export const COMMENTED = {
  buzz: { parents: 'buzzes', comments: 'buzz_comments', parentKey: 'buzz_pk', counter: 'comments' },
  moment: {
    parents: 'moments',
    comments: 'moment_comments',
    parentKey: 'moment_pk',
    counter: 'comment_count',
  },
} as const;

export type Commented = (typeof COMMENTED)[keyof typeof COMMENTED];

/** A comment about to be added: what it says, and its id, made now. */
export const newComment = (comment: {
  parent: { pk: number; id: string };
  author: { pk: number; user_id: string; username: string };
  text: string;
  at: Date;
}) => ({ ...comment, id: newId('cmt') });
export type NewComment = ReturnType<typeof newComment>;

/** The row a new comment reads as once added. */
export const commentRow = (comment: NewComment): CommentRow => ({
  id: comment.id,
  parent_id: comment.parent.id,
  text: comment.text,
  created_at: comment.at,
  author_id: comment.author.user_id,
  author_username: comment.author.username,
});

/** SQL of the comments on buzzes or on moments: one shape for both. */
export function commentsStore(db: Db, on: Commented) {
  const comments = sql.identifier([on.comments]);
  const parents = sql.identifier([on.parents]);
  const parentKey = sql.identifier([on.parentKey]);
  const counter = sql.identifier([on.counter]);
  return {
    /**
     * Adds a profile's comment and counts it on what it hangs on, with `added` (its event) when given,
     * in one statement. Answers the deliveries the event made.
     */
    add: (comment: NewComment, added?: EventInStatement) => {
      const event = eventPartsIfAny(added, 'comment');
      return db.one(sql.type(DeliveriesMade)`
        with comment as (
          insert into ${comments} (id, ${parentKey}, author_pk, text, created_at)
          values (${comment.id}, ${comment.parent.pk}, ${comment.author.pk}, ${comment.text},
                  ${sql.timestamp(comment.at)})
          returning id
        ), counted as (
          update ${parents} set ${counter} = ${counter} + 1 where pk = ${comment.parent.pk}
        )${event.moreCtes}
        select ${event.deliveries} as deliveries`);
    },

    /** Newest first, after a cursor's position. */
    list: (parentPk: number, options: { after?: Position; limit: number }) =>
      db.any(sql.type(CommentRow)`
        select c.id, p.id as parent_id, c.text, c.created_at, a.user_id as author_id, a.username as author_username
        from ${comments} c join ${parents} p on p.pk = c.${parentKey} join profiles a on a.pk = c.author_pk
        where c.${parentKey} = ${parentPk} ${after('c', options.after)}
        order by c.created_at desc, c.id desc
        limit ${options.limit}`),
  };
}
