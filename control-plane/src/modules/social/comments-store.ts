import { sql } from 'slonik';
import type { Position } from '../../platform/cursors.js';
import type { Db } from '../../platform/transaction.js';
import { CommentRow } from './schema.js';
import { after } from './store.js';

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

/** SQL of the comments on buzzes or on moments: one shape for both. */
export function commentsStore(db: Db, on: Commented) {
  const comments = sql.identifier([on.comments]);
  const parents = sql.identifier([on.parents]);
  const parentKey = sql.identifier([on.parentKey]);
  const counter = sql.identifier([on.counter]);
  return {
    /** Adds a comment and counts it on what it hangs on, in one statement. */
    insert: async (comment: { id: string; parentPk: number; authorPk: number; text: string; at: Date }) => {
      await db.query(sql.unsafe`
        with comment as (
          insert into ${comments} (id, ${parentKey}, author_pk, text, created_at)
          values (${comment.id}, ${comment.parentPk}, ${comment.authorPk}, ${comment.text}, ${sql.timestamp(comment.at)})
        )
        update ${parents} set ${counter} = ${counter} + 1 where pk = ${comment.parentPk}`);
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
