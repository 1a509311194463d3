import { sql } from 'slonik';
import { type SandboxPart, sandboxIds } from '../../platform/sandbox.js';
import { SANDBOX_CLIPS, type SandboxClips } from '../media/sandbox.js';
import { SANDBOX_USER_IDS } from './sandbox.js';

/** The sandbox's moments: every clip shown several times, by many profiles, over the last days. */
export const SANDBOX_MOMENTS = 48;
const HOURS_APART = 3;
const CAPTIONS = [
  'Behind the scenes today',
  'Testing the new setup',
  'Golden hour 🌅',
  'Weekend vibes',
  '¡Qué día!',
  'On repeat all week',
  'First try, no edits',
  'Guess where this is?',
] as const;

/**
 * Who likes moment `n`: a few profiles after its author, never the author; every count below is
 * what its rows count.
 */
function drawMoments() {
  const users = SANDBOX_USER_IDS;
  return Array.from({ length: SANDBOX_MOMENTS }, (_, index) => {
    const n = index + 1;
    const author = users[(n * 7) % users.length]!;
    const likers = Array.from({ length: n % 7 }, (_, k) => users[(n * 7 + 1 + k * 5) % users.length]!).filter(
      (user, k, all) => user !== author && all.indexOf(user) === k,
    );
    const commenter = n % 4 === 0 ? users[(n * 7 + 3) % users.length]! : null;
    return {
      n,
      author,
      clip: SANDBOX_CLIPS[n % SANDBOX_CLIPS.length]!.name,
      caption: CAPTIONS[n % CAPTIONS.length]!,
      age: (SANDBOX_MOMENTS - n + 1) * HOURS_APART * 3_600,
      likers,
      commenter,
      views: likers.length * 3 + (n % 11),
    };
  });
}

/** Moments over the sandbox profiles, each with media of its own showing one of the shared clips. */
export const momentsSandbox = (clips: SandboxClips): SandboxPart => ({
  name: 'moments',
  prepare: clips.prepare,
  seed: async (tx, appId, at) => {
    const moments = drawMoments();
    const seededAt = sql.timestamp(at);
    const ids = sandboxIds(appId);
    const momentId = (n: number) => ids('mom', n);
    const mediaId = (n: number) => ids('med', `m${n}`);
    await clips.seed(
      tx,
      appId,
      at,
      moments.map((moment) => ({ id: mediaId(moment.n), clip: moment.clip })),
    );
    const author = (alias: string, userId: string) =>
      sql.fragment`join profiles ${sql.identifier([alias])} on ${sql.identifier([alias, 'app_id'])} = ${appId}
        and ${sql.identifier([alias, 'mode'])} = 'test' and ${sql.identifier([alias, 'user_id'])} = ${sql.identifier([userId])}`;
    await tx.query(sql.unsafe`
      insert into moments (id, app_id, mode, author_pk, media_id, caption, like_count, comment_count, view_count,
                           created_at)
      select m.id, ${appId}, 'test', a.pk, m.media_id, m.caption, m.likes, m.comments, m.views,
             ${seededAt} - make_interval(secs => m.age)
      from ${sql.unnest(
        moments.map((moment) => [
          momentId(moment.n),
          moment.author,
          mediaId(moment.n),
          moment.caption,
          moment.likers.length,
          moment.commenter ? 1 : 0,
          moment.views,
          moment.age,
        ]),
        ['text', 'text', 'text', 'text', 'int4', 'int4', 'int4', 'int4'],
      )} as m (id, author_id, media_id, caption, likes, comments, views, age)
      ${author('a', 'author_id')}`);
    await tx.query(sql.unsafe`
      insert into moment_likes (moment_pk, profile_pk, created_at)
      select mo.pk, a.pk, mo.created_at + interval '1 minute'
      from ${sql.unnest(
        moments.flatMap((moment) => moment.likers.map((liker) => [momentId(moment.n), liker])),
        ['text', 'text'],
      )} as l (moment_id, liker_id)
      join moments mo on mo.id = l.moment_id
      ${author('a', 'liker_id')}`);
    await tx.query(sql.unsafe`
      insert into moment_comments (id, moment_pk, author_pk, text, created_at)
      select l.id, mo.pk, a.pk, 'Love this!', mo.created_at + interval '5 minutes'
      from ${sql.unnest(
        moments.flatMap((moment) =>
          moment.commenter ? [[ids('cmt', `m${moment.n}`), momentId(moment.n), moment.commenter]] : [],
        ),
        ['text', 'text', 'text'],
      )} as l (id, moment_id, commenter_id)
      join moments mo on mo.id = l.moment_id
      ${author('a', 'commenter_id')}`);
  },
});
