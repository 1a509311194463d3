import type { DatabasePool } from 'slonik';
import type { Principal, UserPrincipal } from '../../platform/caller.js';
import { type Clock, utcDay } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Outbox } from '../../platform/outbox.js';
import { PRUNE_BATCH, pruneInBatches } from '../../platform/pruning.js';
import type { Sandbox } from '../../platform/sandbox.js';
import type { Transaction } from '../../platform/transaction.js';
import { MOMENT_VIDEO } from '../media/schema.js';
import type { MediaService } from '../media/service.js';
import { COMMENTED, commentPresenter, commentRow, commentsStore, newComment } from './comments-store.js';
import { momentsSandbox } from './moments-sandbox.js';
import { momentsStore } from './moments-store.js';
import type { MomentRow } from './schema.js';
import type { SocialService } from './service.js';
import type { Scope } from './store.js';

const presentComment = commentPresenter('moment_id');

/**
 * Moments: short videos a user publishes from a storage object of theirs, checked with ffprobe and
 * with a thumbnail from ffmpeg (the media service); likes, comments and daily views. Profiles come
 * from the social service, and so does the sandbox.
 */
export function createMomentsService(deps: {
  pool: DatabasePool;
  clock: Clock;
  outbox: Outbox;
  cursors: Cursors;
  social: SocialService;
  media: MediaService;
  sandbox: Sandbox;
}) {
  const store = momentsStore(deps.pool);
  deps.sandbox.register(momentsSandbox(deps.media.sandboxClips));
  deps.media.registerShowing((tx, mediaIds, at) => momentsStore(tx).deleteShowing(mediaIds, at));

  const present = (row: MomentRow) => {
    const { url, thumbnail_url } = deps.media.urls(row.media_id);
    return {
      id: row.id,
      author_id: row.author_id,
      author_username: row.author_username,
      caption: row.caption,
      media_type: 'video' as const,
      video_url: url,
      thumbnail_url,
      width: row.width,
      height: row.height,
      duration_ms: row.duration_ms,
      like_count: row.like_count,
      comment_count: row.comment_count,
      view_count: row.view_count,
      created_at: row.created_at.toISOString(),
    };
  };

  async function requireMoment(scope: Scope, id: string, db: DatabasePool | Transaction = deps.pool) {
    const moment = await momentsStore(db).moment(scope, id);
    if (!moment) throw errors.notFound(`Moment ${id}`);
    return moment;
  }

  async function remove(principal: Principal, id: string, tx: Transaction, authorPk?: number) {
    const scope = await deps.social.scope(principal);
    const mediaId = await momentsStore(tx).delete(scope, id, deps.clock.now(), authorPk);
    if (mediaId === null) throw errors.notFound(`Moment ${id}`);
    await deps.media.release(tx, [mediaId]);
    return { ok: true as const, id };
  }

  return {
    /**
     * Publishes a moment from the user's ready video: checked and thumbnailed before the transaction
     * takes a connection, recorded in it with its media and its `sip.created` event.
     */
    publish: async (user: UserPrincipal, input: { object_id: string; caption?: string }, tx: Transaction) => {
      const scope = await deps.social.scope(user);
      // Without a profile, refused before ffmpeg runs for nothing.
      await deps.social.ownProfile(user);
      const draft = await deps.media.prepare(
        user,
        { objectId: input.object_id, ownerUserId: user.userId },
        MOMENT_VIDEO,
        { in: 'body', name: 'object_id' },
      );
      try {
        const author = await deps.social.ownProfile(user, tx);
        await deps.media.record(tx, user, draft);
        const id = newId('mom');
        await momentsStore(tx).insert(scope, {
          id,
          authorPk: author.pk,
          mediaId: draft.id,
          caption: input.caption ?? '',
          at: deps.clock.now(),
        });
        const moment = present(await requireMoment(scope, id, tx));
        await deps.outbox.emit(tx, {
          ...scope,
          type: 'sip.created',
          data: { moment },
          profileId: author.user_id,
        });
        return moment;
      } catch (error) {
        await deps.media.discard(draft);
        throw error;
      }
    },

    get: async (principal: Principal, id: string) =>
      present(await requireMoment(await deps.social.scope(principal), id)),

    list: async (principal: Principal, query: { author?: string; limit: number; cursor?: string }) => {
      const scope = await deps.social.scope(principal);
      const position = deps.cursors.decode(query.cursor);
      const rows = await store.list(scope, {
        // An unknown author has no moments: an empty page, as for buzzes.
        ...(query.author === undefined ? {} : { author: query.author }),
        ...(position ? { after: position } : {}),
        limit: query.limit + 1,
      });
      return deps.cursors.page(rows, query.limit, present);
    },

    /** Moderation: any moment of the app; its URLs stop working. */
    delete: (principal: Principal, id: string, tx: Transaction) => remove(principal, id, tx),

    /** The user's own moment; another's is a 404 as if it did not exist. */
    deleteMine: async (user: UserPrincipal, id: string, tx: Transaction) => {
      const author = await deps.social.ownProfile(user, tx, () => errors.notFound(`Moment ${id}`));
      return remove(user, id, tx, author.pk);
    },

    like: async (user: UserPrincipal, id: string, tx: Transaction) => {
      const me = await deps.social.ownProfile(user, tx);
      const moment = await requireMoment(await deps.social.scope(user), id, tx);
      const { likes } = await momentsStore(tx).like(moment.pk, me.pk, deps.clock.now());
      return { moment_id: id, liked: true, like_count: likes };
    },

    unlike: async (user: UserPrincipal, id: string, tx: Transaction) => {
      const me = await deps.social.ownProfile(user, tx, () => errors.notFound(`Like of moment ${id}`));
      const moment = await requireMoment(await deps.social.scope(user), id, tx);
      if ((await momentsStore(tx).unlike(moment.pk, me.pk)) === null) {
        throw errors.notFound(`Like of moment ${id}`);
      }
      return { ok: true as const, id };
    },

    /** A view the user's client reports: counted once per user, moment and UTC day. */
    view: async (user: UserPrincipal, id: string) => {
      const moment = await requireMoment(await deps.social.scope(user), id);
      const { counted, views } = await store.view(moment.pk, user.userId, utcDay(deps.clock.now()));
      return { moment_id: id, counted, view_count: views };
    },

    comment: async (user: UserPrincipal, id: string, text: string, tx: Transaction) => {
      const me = await deps.social.ownProfile(user, tx);
      const moment = await requireMoment(await deps.social.scope(user), id, tx);
      const comment = newComment({ parent: moment, author: me, text, at: deps.clock.now() });
      await commentsStore(tx, COMMENTED.moment).add(comment);
      return presentComment(commentRow(comment));
    },

    listComments: async (principal: Principal, id: string, query: { limit: number; cursor?: string }) => {
      const moment = await requireMoment(await deps.social.scope(principal), id);
      const position = deps.cursors.decode(query.cursor);
      const rows = await commentsStore(deps.pool, COMMENTED.moment).list(moment.pk, {
        ...(position ? { after: position } : {}),
        limit: query.limit + 1,
      });
      return deps.cursors.page(rows, query.limit, presentComment);
    },

    /** Views of past days: only today's tell a repeat view apart. */
    pruneViews: () =>
      pruneInBatches((limit) => store.pruneViews(utcDay(deps.clock.now()), Math.min(limit, PRUNE_BATCH))),
  };
}

export type MomentsService = ReturnType<typeof createMomentsService>;
