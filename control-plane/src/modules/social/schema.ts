import { Type } from '@sinclair/typebox';
import { z } from 'zod';
import type { UserLimit } from '../../platform/admission.js';
import { displayName, postText } from '../../platform/identities.js';
import {
  Cursor,
  Deleted,
  Limit,
  ListLimit,
  ListPageQuery,
  literalUnion,
  Page,
} from '../../platform/schemas.js';

export const MAX_BUZZ_CHARACTERS = 2_000;
export const MAX_COMMENT_CHARACTERS = 1_000;
export const DEFAULT_PAGE = 20;
export const MAX_SEARCH_PER_GROUP = 50;
export const DEFAULT_SEARCH_PER_GROUP = 20;
export const MAX_QUERY_CHARACTERS = 100;
export const MAX_CAPTION_CHARACTERS = 500;
/** Search ranks the newest matching buzzes: a common word does not rank the whole history. */
export const SEARCH_BUZZ_CANDIDATES = 200;
/**
 * Search finds the newest matches of words common enough in the app's newest buzzes by reading those
 * in order, at most this many, and stops at the candidates it needs: a few milliseconds, where the
 * word index would fetch every match of a week or more. Rarer words go to the index, read from the
 * newest week back (svc_search_buzzes, migration 0043, chooses with search-costs.ts).
 */
export const SEARCH_BUZZ_WALK = 60_000;
/** How many of the newest buzzes tell whether the words are common enough to walk. */
export const SEARCH_BUZZ_PROBE = 1_000;
/**
 * Search ranks the profiles with the nearest names, and as many of the verified ones: many equally
 * close names are not all ranked. As many as a page holds, because the walk to the nearest names
 * grows with how many it takes: 10 ms for 50 and 30 ms for 200 for a partial username (user0421)
 * among 100,000 profiles.
 */
export const SEARCH_PROFILE_NEAREST = MAX_SEARCH_PER_GROUP;
/**
 * Words read for the names holding a word that starts with a one-word query, or the words or pairs
 * nearest to it: a name may hold several (its username and its full name: maria92 María), and the
 * names found are ranked once each.
 */
export const SEARCH_PROFILE_WORDS_READ = 4 * SEARCH_PROFILE_NEAREST;
/**
 * Terms let go by renames that one transaction of the vocabulary's sweep looks at. New profiles and
 * renames wait for it: while it waits for those under way (VOCABULARY_LOCK_WAIT_MS at most), and
 * while it deletes (about 35 ms for a batch).
 */
export const VOCABULARY_PRUNE_BATCH = 1_000;
export const VOCABULARY_LOCK_WAIT_MS = 200;

export const BUZZ_TYPES = ['text'] as const;
export const REACTION_KINDS = ['like', 'love', 'laugh', 'wow', 'sad', 'angry'] as const;

/**
 * Usernames: 3-30 ASCII letters, digits, "_" and "."; a dot neither first, last nor doubled. Unique
 * per app and mode without regard to case; shown as the user wrote it.
 */
export const USERNAME_PATTERN = '^(?!.*\\.\\.)[A-Za-z0-9_][A-Za-z0-9_.]{1,28}[A-Za-z0-9_]$';

/** Writes each user may make, per window: what a person does, not what a script does. */
export const USER_LIMITS = {
  profile: { name: 'profile', limit: 30, windowSeconds: 3_600 },
  buzzes: { name: 'buzzes', limit: 100, windowSeconds: 3_600 },
  comments: { name: 'comments', limit: 300, windowSeconds: 3_600 },
  reactions: { name: 'reactions', limit: 1_000, windowSeconds: 3_600 },
  follows: { name: 'follows', limit: 500, windowSeconds: 3_600 },
  /** Moments published and deleted. */
  moments: { name: 'moments', limit: 30, windowSeconds: 3_600 },
  /** The user's own reads (their profile, their search, the views they report): one a second on average. */
  reads: { name: 'reads', limit: 3_600, windowSeconds: 3_600 },
} as const satisfies Record<string, UserLimit>;

const Username = Type.String({
  pattern: USERNAME_PATTERN,
  description:
    '3-30 ASCII letters, digits, "_" and "." (a dot neither first, last nor doubled); unique in the app without regard to case',
});

export const UsernameParams = Type.Object({ username: Username }, { additionalProperties: false });
export const BuzzParams = Type.Object(
  { id: Type.String({ pattern: '^[A-Za-z0-9_]{1,64}$', description: 'The buzz id' }) },
  { additionalProperties: false },
);

export const Profile = Type.Object(
  {
    id: Type.String({ description: 'The app’s own user id: the profile id that events and messaging name' }),
    username: Type.String(),
    full_name: Type.String(),
    category: Type.String(),
    followers: Type.Integer(),
    following: Type.Integer(),
    buzzes: Type.Integer({ description: 'Buzzes published and not deleted' }),
    verified: Type.Boolean({ description: 'Set only by the app’s server (PATCH /v1/profiles/{username})' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const ProfileWrite = Type.Object(
  {
    username: Username,
    full_name: Type.Optional(displayName(100, 'The name shown; default empty')),
    category: Type.Optional(displayName(50, 'What the profile is (e.g. musician, café); default empty')),
  },
  { additionalProperties: false },
);

export const ProfileVerification = Type.Object({ verified: Type.Boolean() }, { additionalProperties: false });

export const Buzz = Type.Object(
  {
    id: Type.String(),
    type: Type.String({ description: 'text' }),
    text: Type.String(),
    reactions: Type.Integer(),
    comments: Type.Integer(),
    created_at: Type.String({ format: 'date-time' }),
    author_id: Type.String({ description: 'The author’s profile id (the app’s user id)' }),
    author_username: Type.String(),
  },
  { additionalProperties: false },
);

export const BuzzWrite = Type.Object(
  {
    type: Type.Optional(literalUnion(BUZZ_TYPES, { description: 'Default text' })),
    text: postText(MAX_BUZZ_CHARACTERS, 'The post'),
  },
  { additionalProperties: false },
);

export const BuzzListQuery = Type.Object(
  {
    author: Type.Optional(Username),
    limit: ListLimit(DEFAULT_PAGE),
    cursor: Type.Optional(Cursor),
  },
  { additionalProperties: false },
);
export const PageQuery = ListPageQuery(DEFAULT_PAGE);

export const BuzzPage = Page(Buzz, 'Newest first; deleted buzzes never appear');

export const BuzzDeleted = Deleted();

export const ReactionWrite = Type.Object(
  { kind: Type.Optional(literalUnion(REACTION_KINDS, { description: 'Default like' })) },
  { additionalProperties: false },
);
export const Reaction = Type.Object(
  {
    buzz_id: Type.String(),
    kind: Type.String(),
    reactions: Type.Integer({ description: 'The buzz’s reactions now' }),
  },
  { additionalProperties: false },
);

export const Comment = Type.Object(
  {
    id: Type.String(),
    buzz_id: Type.String(),
    text: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    author_id: Type.String(),
    author_username: Type.String(),
  },
  { additionalProperties: false },
);
export const CommentWrite = Type.Object(
  { text: postText(MAX_COMMENT_CHARACTERS, 'The comment') },
  { additionalProperties: false },
);
export const CommentPage = Page(Comment, 'Newest first');

export const Follow = Type.Object(
  {
    username: Type.String(),
    following: Type.Literal(true),
    followers: Type.Integer({ description: 'The followed profile’s followers now' }),
  },
  { additionalProperties: false },
);
export const Unfollowed = Deleted({}, 'The delete shape (`id` is the username)');

export const SearchQuery = Type.Object(
  {
    q: postText(MAX_QUERY_CHARACTERS, 'What to look for'),
    type: Type.Optional(literalUnion(['profiles', 'buzzes'] as const, { description: 'Default both' })),
    limit: Limit(MAX_SEARCH_PER_GROUP, DEFAULT_SEARCH_PER_GROUP, 'Results per group'),
  },
  { additionalProperties: false },
);
export const SearchResult = Type.Object(
  {
    query: Type.String(),
    profiles: Type.Array(
      Type.Object(
        {
          id: Type.Optional(
            Type.String({ description: 'The profile id (the app’s user id): secret key only' }),
          ),
          username: Type.String(),
          full_name: Type.String(),
          verified: Type.Boolean(),
          followers: Type.Integer(),
        },
        { additionalProperties: false },
      ),
      { description: 'Exact username first, then the closest names; verified and followed profiles ahead' },
    ),
    buzzes: Type.Array(
      Type.Object(
        {
          id: Type.String(),
          type: Type.String(),
          text: Type.String(),
          author_id: Type.Optional(Type.String({ description: 'The author’s profile id: secret key only' })),
          author_username: Type.String(),
          created_at: Type.String({ format: 'date-time' }),
        },
        { additionalProperties: false },
      ),
      { description: 'Buzzes with every word of q (accents and case ignored), best match first' },
    ),
  },
  { additionalProperties: false },
);

export const ProfileRow = z.object({
  pk: z.number(),
  user_id: z.string(),
  username: z.string(),
  full_name: z.string(),
  category: z.string(),
  followers: z.number(),
  following: z.number(),
  buzzes: z.number(),
  verified: z.boolean(),
  created_at: z.date(),
});
export type ProfileRow = z.infer<typeof ProfileRow>;

export const BuzzRow = z.object({
  pk: z.number(),
  id: z.string(),
  type: z.string(),
  text: z.string(),
  reactions: z.number(),
  comments: z.number(),
  created_at: z.date(),
  author_pk: z.number(),
  author_id: z.string(),
  author_username: z.string(),
});
export type BuzzRow = z.infer<typeof BuzzRow>;

/** A comment on a buzz or a moment (`parent_id`). */
export const CommentRow = z.object({
  id: z.string(),
  parent_id: z.string(),
  text: z.string(),
  created_at: z.date(),
  author_id: z.string(),
  author_username: z.string(),
});
export type CommentRow = z.infer<typeof CommentRow>;

// ----- moments ---------------------------------------------------------------------------------

const Id = (description: string) => Type.String({ pattern: '^[A-Za-z0-9_]{1,64}$', description });

export const MomentParams = Type.Object({ id: Id('The moment id') }, { additionalProperties: false });

export const Moment = Type.Object(
  {
    id: Type.String(),
    author_id: Type.String({ description: 'The author’s profile id (the app’s user id)' }),
    author_username: Type.String(),
    caption: Type.String(),
    media_type: Type.Literal('video'),
    video_url: Type.String({ format: 'uri', description: 'Plays without a key; answers Range requests' }),
    thumbnail_url: Type.String({
      format: 'uri',
      description: 'A JPEG, at most 640 pixels a side, without a key',
    }),
    width: Type.Integer({ description: 'Pixels, as shown (upright), read from the file' }),
    height: Type.Integer({ description: 'Pixels, as shown (upright), read from the file' }),
    duration_ms: Type.Integer({ description: 'Read from the file' }),
    like_count: Type.Integer(),
    comment_count: Type.Integer(),
    view_count: Type.Integer({ description: 'Viewers, each counted once per UTC day' }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false },
);

export const MomentWrite = Type.Object(
  {
    object_id: Type.String({
      pattern: '^obj_[A-Za-z0-9]{1,64}$',
      description: 'A ready storage object the user uploaded (POST /v1/me/storage/uploads): the video',
    }),
    caption: Type.Optional(
      Type.Union([Type.Literal(''), postText(MAX_CAPTION_CHARACTERS, 'The caption')], {
        description: `0-${MAX_CAPTION_CHARACTERS} characters; default empty`,
      }),
    ),
  },
  { additionalProperties: false },
);

export const MomentListQuery = BuzzListQuery;
export const MomentPage = Page(Moment, 'Newest first; deleted moments never appear');

export const Like = Type.Object(
  {
    moment_id: Type.String(),
    liked: Type.Boolean(),
    like_count: Type.Integer({ description: 'The moment’s likes now' }),
  },
  { additionalProperties: false },
);

export const View = Type.Object(
  {
    moment_id: Type.String(),
    counted: Type.Boolean({ description: 'false when this user was already counted today (UTC)' }),
    view_count: Type.Integer(),
  },
  { additionalProperties: false },
);

export const MomentComment = Type.Object(
  {
    id: Type.String(),
    moment_id: Type.String(),
    text: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    author_id: Type.String(),
    author_username: Type.String(),
  },
  { additionalProperties: false },
);
export const MomentCommentPage = Page(MomentComment, 'Newest first');

export const MomentRow = z.object({
  pk: z.number(),
  id: z.string(),
  caption: z.string(),
  like_count: z.number(),
  comment_count: z.number(),
  view_count: z.number(),
  created_at: z.date(),
  media_id: z.string(),
  width: z.number(),
  height: z.number(),
  duration_ms: z.number(),
  author_id: z.string(),
  author_username: z.string(),
});
export type MomentRow = z.infer<typeof MomentRow>;
