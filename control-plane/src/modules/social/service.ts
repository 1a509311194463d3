import type { DatabasePool } from 'slonik';
import { UniqueIntegrityConstraintViolationError } from 'slonik';
import type { Principal, UserPrincipal } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors, ServiceError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Outbox } from '../../platform/outbox.js';
import type { Sandbox } from '../../platform/sandbox.js';
import {
  type Db,
  inTransaction,
  sqlState,
  type Transaction,
  wroteNothing,
} from '../../platform/transaction.js';
import { COMMENTED, commentPresenter, commentRow, commentsStore, newComment } from './comments-store.js';
import { socialSandbox } from './sandbox.js';
import { type BuzzRow, type ProfileRow, VOCABULARY_LOCK_WAIT_MS, VOCABULARY_PRUNE_BATCH } from './schema.js';
import { searchStore } from './search-store.js';
import { type Scope, socialStore } from './store.js';

const presentProfile = (row: ProfileRow) => ({
  id: row.user_id,
  username: row.username,
  full_name: row.full_name,
  category: row.category,
  followers: row.followers,
  following: row.following,
  buzzes: row.buzzes,
  verified: row.verified,
  created_at: row.created_at.toISOString(),
});

const presentBuzz = (row: BuzzRow) => ({
  id: row.id,
  type: row.type,
  text: row.text,
  reactions: row.reactions,
  comments: row.comments,
  created_at: row.created_at.toISOString(),
  author_id: row.author_id,
  author_username: row.author_username,
});

const presentComment = commentPresenter('buzz_id');

const scopeOf = (principal: Principal): Scope => ({ appId: principal.appId, mode: principal.mode });

const profileRequired = () =>
  new ServiceError('conflict', 'Create the user’s profile first (PUT /v1/me/profile)', {
    code: 'PROFILE_REQUIRED',
  });
const usernameTaken = (username: string) =>
  new ServiceError('conflict', `The username ${username} is taken`, { code: 'USERNAME_TAKEN' });

/** The SQLSTATE of a lock not had within lock_timeout. */
const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Profiles, buzzes, reactions, comments, follows and search: the app's public data, per app and key
 * mode. Writes run in the transaction of their charge and emit their events in it; a test key's app
 * gets its sandbox's fixtures on its first call. Moments and About content build on its profiles
 * through `scope`, `ownProfile` and `profileNamed`.
 */
export function createSocialService(deps: {
  pool: DatabasePool;
  /** Where search runs (the core's searchPool). */
  searchPool: DatabasePool;
  clock: Clock;
  outbox: Outbox;
  cursors: Cursors;
  sandbox: Sandbox;
}) {
  const store = socialStore(deps.pool);
  const searching = searchStore(deps.searchPool);
  deps.sandbox.register(socialSandbox);

  /** The scope of a call, its sandbox seeded first. */
  async function scoped(principal: Principal): Promise<Scope> {
    const scope = scopeOf(principal);
    await deps.sandbox.ensure(scope);
    return scope;
  }

  /**
   * The user's profile, read in the write's transaction. Without one, a write that needs it is a
   * 409; a delete of something of theirs a 404 (there is nothing of theirs to delete).
   */
  async function myProfile(user: UserPrincipal, tx?: Transaction, missing: () => Error = profileRequired) {
    const scope = await scoped(user);
    const profile = await socialStore(tx ?? deps.pool).profileOfUser(scope, user.userId);
    if (!profile) throw missing();
    return profile;
  }

  async function requireProfile(scope: Scope, username: string, db: DatabasePool | Transaction = deps.pool) {
    const profile = await socialStore(db).profileByUsername(scope, username);
    if (!profile) throw errors.notFound(`Profile ${username}`);
    return profile;
  }

  async function requireBuzz(scope: Scope, id: string, db: DatabasePool | Transaction = deps.pool) {
    const buzz = await socialStore(db).buzz(scope, id);
    if (!buzz) throw errors.notFound(`Buzz ${id}`);
    return buzz;
  }

  const buzzRef = (buzz: BuzzRow) => ({
    id: buzz.id,
    author_id: buzz.author_id,
    author_username: buzz.author_username,
  });

  return {
    /** The call's app and mode, its sandbox seeded first: every public-data call starts here. */
    scope: scoped,
    /** The user's profile for a write of theirs, read in its transaction (409 PROFILE_REQUIRED). */
    ownProfile: myProfile,
    /** A profile by username (any case), or a 404. */
    profileNamed: requireProfile,

    // ----- profiles ---------------------------------------------------------------------------

    /** The full name on a user's profile, or null when they have none. */
    /** A user's profile name; `db` is the caller's transaction when it has one (never a second connection). */
    displayNameOf: async (principal: Principal, userId: string, db: Db = deps.pool) =>
      (await socialStore(db).profileOfUser(await scoped(principal), userId))?.full_name ?? null,

    getProfile: async (principal: Principal, username: string) =>
      presentProfile(await requireProfile(await scoped(principal), username)),

    getMyProfile: async (user: UserPrincipal) => presentProfile(await myProfile(user)),

    /** Creates or replaces the user's profile; a rename keeps its id and frees the old username. */
    putMyProfile: async (
      user: UserPrincipal,
      input: { username: string; full_name?: string; category?: string },
      tx: Transaction,
    ) => {
      const scope = await scoped(user);
      try {
        const profile = await socialStore(tx).upsertProfile(scope, {
          userId: user.userId,
          username: input.username,
          fullName: input.full_name ?? '',
          category: input.category ?? '',
          at: deps.clock.now(),
        });
        return presentProfile(profile);
      } catch (error) {
        // Another profile has the username (the statement failed, so the call's transaction ends).
        if (error instanceof UniqueIntegrityConstraintViolationError) throw usernameTaken(input.username);
        throw error;
      }
    },

    setVerified: async (principal: Principal, username: string, verified: boolean, tx: Transaction) => {
      const profile = await socialStore(tx).setVerified(await scoped(principal), username, verified);
      if (!profile) throw errors.notFound(`Profile ${username}`);
      return presentProfile(profile);
    },

    // ----- buzzes -----------------------------------------------------------------------------

    publish: async (user: UserPrincipal, input: { type?: string; text: string }, tx: Transaction) => {
      const scope = await scoped(user);
      const id = newId('bz');
      const type = input.type ?? 'text';
      const at = deps.clock.now();
      const buzz = (username: string) => ({
        id,
        type,
        text: input.text,
        reactions: 0,
        comments: 0,
        created_at: at.toISOString(),
        author_id: user.userId,
        author_username: username,
      });
      // The author's username is the statement's to tell: the event takes it from there.
      const event = deps.outbox.inStatement({
        ...scope,
        type: 'buzz.created',
        data: { buzz: buzz(deps.outbox.hole('username')) },
        profileId: user.userId,
      });
      const author = await socialStore(tx).publishBuzz(
        scope,
        { id, userId: user.userId, type, text: input.text, at },
        event,
      );
      // The statement matched no profile, so it wrote and locked nothing.
      if (!author) throw wroteNothing(profileRequired());
      event.made(tx, author.deliveries);
      return buzz(author.username);
    },

    getBuzz: async (principal: Principal, id: string) =>
      presentBuzz(await requireBuzz(await scoped(principal), id)),

    listBuzzes: async (principal: Principal, query: { author?: string; limit: number; cursor?: string }) => {
      const scope = await scoped(principal);
      const position = deps.cursors.decode(query.cursor);
      // An author no profile has lists nothing.
      const rows = await store.listBuzzes(scope, {
        ...(query.author === undefined ? {} : { author: query.author }),
        ...(position ? { after: position } : {}),
        limit: query.limit + 1,
      });
      return deps.cursors.page(rows, query.limit, presentBuzz);
    },

    /** Moderation: any buzz of the app, soft-deleted. */
    deleteBuzz: async (principal: Principal, id: string, tx: Transaction) => {
      const gone = await socialStore(tx).deleteBuzz(await scoped(principal), id, deps.clock.now());
      if (gone === null) throw errors.notFound(`Buzz ${id}`);
      return { ok: true as const, id };
    },

    /** The user's own buzz, soft-deleted; another's is a 404 as if it did not exist. */
    deleteMyBuzz: async (user: UserPrincipal, id: string, tx: Transaction) => {
      const author = await myProfile(user, tx, () => errors.notFound(`Buzz ${id}`));
      const gone = await socialStore(tx).deleteBuzz(scopeOf(user), id, deps.clock.now(), author.pk);
      if (gone === null) throw errors.notFound(`Buzz ${id}`);
      return { ok: true as const, id };
    },

    // ----- reactions and comments -------------------------------------------------------------

    react: async (user: UserPrincipal, id: string, kind: string, tx: Transaction) => {
      const me = await myProfile(user, tx);
      const scope = scopeOf(user);
      const buzz = await requireBuzz(scope, id, tx);
      const at = deps.clock.now();
      // A new reaction's event goes in the statement that makes it, with the count that statement gives.
      const event = deps.outbox.inStatement({
        ...scope,
        type: 'buzz.reaction',
        data: {
          buzz: { ...buzzRef(buzz), reactions: deps.outbox.hole('reactions') },
          reaction: { kind, user_id: me.user_id, username: me.username, created_at: at.toISOString() },
        },
        profileId: buzz.author_id,
      });
      const { reactions, deliveries } = await socialStore(tx).react(buzz.pk, me.pk, kind, at, event);
      event.made(tx, deliveries);
      return { buzz_id: id, kind, reactions };
    },

    unreact: async (user: UserPrincipal, id: string, tx: Transaction) => {
      const me = await myProfile(user, tx, () => errors.notFound(`Reaction to buzz ${id}`));
      const buzz = await requireBuzz(scopeOf(user), id, tx);
      if (!(await socialStore(tx).unreact(buzz.pk, me.pk))) throw errors.notFound(`Reaction to buzz ${id}`);
      return { ok: true as const, id };
    },

    comment: async (user: UserPrincipal, id: string, text: string, tx: Transaction) => {
      const me = await myProfile(user, tx);
      const scope = scopeOf(user);
      const buzz = await requireBuzz(scope, id, tx);
      const comment = newComment({ parent: buzz, author: me, text, at: deps.clock.now() });
      const presented = presentComment(commentRow(comment));
      // Its event goes in the statement that adds it.
      const event = deps.outbox.inStatement({
        ...scope,
        type: 'buzz.comment',
        data: { buzz: buzzRef(buzz), comment: presented },
        profileId: buzz.author_id,
      });
      const { deliveries } = await commentsStore(tx, COMMENTED.buzz).add(comment, event);
      event.made(tx, deliveries);
      return presented;
    },

    listComments: async (principal: Principal, id: string, query: { limit: number; cursor?: string }) => {
      const buzz = await requireBuzz(await scoped(principal), id);
      const position = deps.cursors.decode(query.cursor);
      const rows = await commentsStore(deps.pool, COMMENTED.buzz).list(buzz.pk, {
        ...(position ? { after: position } : {}),
        limit: query.limit + 1,
      });
      return deps.cursors.page(rows, query.limit, presentComment);
    },

    // ----- follows ----------------------------------------------------------------------------

    follow: async (user: UserPrincipal, username: string, tx: Transaction) => {
      const me = await myProfile(user, tx);
      const scope = scopeOf(user);
      const followee = await requireProfile(scope, username, tx);
      if (followee.pk === me.pk) {
        throw errors.invalidField(
          'path',
          'username',
          'is the caller’s own profile: a profile cannot follow itself',
        );
      }
      const at = deps.clock.now();
      const { isNew, followers } = await socialStore(tx).follow(me.pk, followee.pk, at);
      if (isNew) {
        await deps.outbox.emit(tx, {
          ...scope,
          type: 'follow.created',
          data: {
            profile: { id: followee.user_id, username: followee.username, followers },
            follower: { id: me.user_id, username: me.username },
            created_at: at.toISOString(),
          },
          profileId: followee.user_id,
        });
      }
      return { username: followee.username, following: true as const, followers };
    },

    unfollow: async (user: UserPrincipal, username: string, tx: Transaction) => {
      const me = await myProfile(user, tx, () => errors.notFound(`Follow of ${username}`));
      const followee = await requireProfile(scopeOf(user), username, tx);
      if (!(await socialStore(tx).unfollow(me.pk, followee.pk))) {
        throw errors.notFound(`Follow of ${username}`);
      }
      return { ok: true as const, id: username };
    },

    // ----- search -----------------------------------------------------------------------------

    /** Profiles and buzzes matching q; with a user, the profiles they follow rank ahead. */
    search: async (
      principal: Principal,
      query: { q: string; type?: 'profiles' | 'buzzes'; limit: number },
      viewer?: UserPrincipal,
    ) => {
      const scope = await scoped(principal);
      const viewerPk = viewer ? (await store.profileOfUser(scope, viewer.userId))?.pk : undefined;
      const [profiles, buzzes] = await Promise.all([
        query.type === 'buzzes' ? [] : searching.searchProfiles(scope, query.q, query.limit, viewerPk),
        query.type === 'profiles' ? [] : searching.searchBuzzes(scope, query.q, query.limit),
      ]);
      return {
        query: query.q,
        // The app's user ids (possibly emails or phone numbers) go to its server, not to its users.
        profiles: profiles.map((row) => ({
          ...(viewer ? {} : { id: row.user_id }),
          username: row.username,
          full_name: row.full_name,
          verified: row.verified,
          followers: row.followers,
        })),
        buzzes: buzzes.map((row) => ({
          id: row.id,
          type: row.type,
          text: row.text,
          ...(viewer ? {} : { author_id: row.author_id }),
          author_username: row.author_username,
          created_at: row.created_at.toISOString(),
        })),
      };
    },

    /**
     * Takes the search terms that renames let go and no name holds any more out of the vocabulary, a
     * batch a transaction. Profile writes under way for longer than VOCABULARY_LOCK_WAIT_MS put the rest
     * off to the next turn.
     */
    pruneVocabulary: async () => {
      let pruned = 0;
      for (;;) {
        try {
          const batch = await inTransaction(deps.pool, (tx) =>
            socialStore(tx).pruneVocabulary(VOCABULARY_PRUNE_BATCH, VOCABULARY_LOCK_WAIT_MS),
          );
          pruned += batch.pruned;
          if (batch.looked < VOCABULARY_PRUNE_BATCH) return { pruned, putOff: false };
        } catch (error) {
          if (sqlState(error) === LOCK_NOT_AVAILABLE) return { pruned, putOff: true };
          throw error;
        }
      }
    },
  };
}

export type SocialService = ReturnType<typeof createSocialService>;
