import { type FragmentSqlToken, sql } from 'slonik';
import type { Db } from '../../platform/transaction.js';
import {
  BuzzRow,
  ProfileRow,
  SEARCH_BUZZ_CANDIDATES,
  SEARCH_BUZZ_PROBE,
  SEARCH_BUZZ_WALK,
  SEARCH_PROFILE_NEAREST,
  SEARCH_PROFILE_WORDS_READ,
} from './schema.js';
import { SEARCH_COSTS } from './search-costs.js';
import { inScope, profileColumns, type Scope } from './store.js';

/**
 * Search's statements, apart from the rest of the app's data, on search's own connections (the core's
 * searchPool), where every call is planned for its values: the profile search's best plans depend on
 * the words. The buzz search's reads keep plans made once a session, in their function (0041, 0043).
 */
export function searchStore(db: Db) {
  return {
    /**
     * Profiles whose username or full name holds something close to q (typos and prefixes, accents
     * and case ignored). The candidates are the nearest names, the nearest verified ones and the
     * exact username; they rank exact first, then closeness, verified, followed by the viewer,
     * followers. So a verified profile is never crowded out by thousands of names as close as its own.
     *
     * The names close to a one-word query are looked up among the names' words, never walked: the
     * names with the word itself, then those with a word starting with it, which are as close as any
     * name can be (migration 0036); when no word starts with it, the names holding the words or pairs
     * of neighbouring words nearest to it (migration 0037). svc_profile_word_matches (0042) finds
     * them, each read with a plan kept for the session, the nearest terms only when they are needed.
     *
     * To be run where every call is planned for its values (the core's searchPool), because for
     * several words how many names q matches decides how to find the nearest: a few, and the GIN
     * index finds them all to be sorted; thousands, and the GiST index walks the nearest first,
     * testing each (migration 0026 says why these are two indexes). The verified ones come the same
     * way, from an index of their own when they are few (migration 0035).
     */
    searchProfiles: (scope: Scope, q: string, limit: number, viewerPk?: number) => {
      // The query folded in place, not joined from elsewhere: the indexes serve it only then.
      // The match on search_name (the GIN indexes), the order on (search_name || '') (the GiST one).
      // A query without a letter or digit has no trigram and matches no name, but either index would
      // read all of the app's names to find that out (220 ms for 100,000): its value makes the first
      // test a constant false, and the branch is planned away.
      const nearest = (only: FragmentSqlToken) => sql.fragment`
        select p.pk from profiles p
        where cardinality(show_trgm(svc_fold(${q}))) > 0 ${only}
          and ${inScope('p', scope)} and svc_fold(${q}) <% p.search_name
        order by (p.search_name || '') <->> svc_fold(${q})
        limit ${SEARCH_PROFILE_NEAREST}`;
      // Whether a name is close to q, tested as <% does (which the planner does not estimate from the
      // statistics).
      const close = sql.fragment`word_similarity(svc_fold(${q}), p.search_name)
        >= current_setting('pg_trgm.word_similarity_threshold')::real`;
      return db.any(sql.type(ProfileRow)`
        with candidates as (
          -- One word: the names holding a word that starts with it, or else the words or pairs of
          -- words nearest to it (migrations 0036, 0037, 0042).
          select m.pk from svc_profile_word_matches(${scope.appId}, ${scope.mode}, ${q},
                                                    ${SEARCH_PROFILE_NEAREST}, ${SEARCH_PROFILE_WORDS_READ}) m (pk)
          union
          -- Several words (or one letter) walk the nearest names: one word never does, whatever it
          -- finds, since a walk to names that are not there reads the whole index. The test at the
          -- branch's top, where its value drops the branch unplanned for a word.
          select gated.pk from (${nearest(sql.fragment``)}) gated where not svc_one_word(svc_fold(${q}))
          union
          (${nearest(sql.fragment`and p.verified`)})
          union
          select p.pk from profiles p where ${inScope('p', scope)} and lower(p.username) = lower(${q})
        )
        select ${profileColumns}
        from candidates c join profiles p on p.pk = c.pk
        -- Each close, as the terms' holders are (the words' split and pg_trgm's agree): a check, not
        -- a search.
        where ${close}
        order by lower(p.username) = lower(${q}) desc,
                 round(word_similarity(svc_fold(${q}), p.search_name)::numeric, 1) desc,
                 p.verified desc,
                 ${viewerPk === undefined ? sql.fragment`` : sql.fragment`exists (select 1 from follows f where f.follower_pk = ${viewerPk} and f.followee_pk = p.pk) desc,`}
                 p.followers desc, p.pk
        limit ${limit}`);
    },

    /**
     * Buzzes holding every word of q (accents and case ignored): the newest matches, best ranked
     * first, joined to their authors only once the page is cut.
     *
     * The newest matches come from whichever of two reads finds them cheaply, chosen as the search
     * runs by svc_search_buzzes (migration 0043) from a probe of the app's newest SEARCH_BUZZ_PROBE
     * buzzes, which tells how common the words are and how many buzzes a week brings: its newest
     * SEARCH_BUZZ_WALK buzzes tested in order, which stops once it has the candidates; or the word
     * index, keyed by week, read from the newest week back until it has them. The planner cannot
     * choose between them itself: it takes the words of a query as independent, and words that go
     * together (two of one language) match far more buzzes than it expects. Each read has the one plan
     * that serves every app, made once a session.
     */
    searchBuzzes: (scope: Scope, q: string, limit: number) =>
      db.any(sql.type(BuzzRow)`
        select pk, id, type, text, reactions, comments, created_at, author_pk, author_id, author_username
        from svc_search_buzzes(${scope.appId}, ${scope.mode}, ${q}, ${limit}, ${SEARCH_BUZZ_PROBE},
                               ${SEARCH_BUZZ_WALK}, ${SEARCH_BUZZ_CANDIDATES}, ${SEARCH_COSTS.walkedBuzzUs},
                               ${SEARCH_COSTS.indexReadUs}, ${SEARCH_COSTS.indexMatchUs})`),
  };
}
