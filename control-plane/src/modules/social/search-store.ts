import { type FragmentSqlToken, sql } from 'slonik';
import { z } from 'zod';
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
import { walkFrom } from './search-costs.js';
import { inScope, profileColumns, type Scope } from './store.js';

/** A query of one word (as pg_trgm takes words: runs of letters and digits) of two characters or more. */
const ONE_WORD = '^[^[:alnum:]]*[[:alnum:]]{2,}[^[:alnum:]]*$';
/** What `explain (format json)` answers, as far as it is read. */
const Explained = z.object({
  'QUERY PLAN': z.array(z.object({ Plan: z.object({ 'Plan Rows': z.number() }) })),
});

/**
 * Search's statements, apart from the rest of the app's data, on search's own connections (the core's
 * searchPool), where every call is planned for its values: the profile search's best plans depend on
 * the words. The buzz search's reads keep plans made once a session, in their function (0041).
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
     * of neighbouring words nearest to it (migration 0037).
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
      // A branch for one kind of query only, its kind tested at its top: when q is of the other kind,
      // the planner drops the branch unplanned (a subquery whose own filter is a constant false). The
      // same test deeper inside left it every layer above to plan: 0.1-0.25 ms a query of several words.
      const onlyIf = (oneWord: boolean, branch: FragmentSqlToken) => sql.fragment`
        select gated.pk from (${branch}) gated
        where svc_fold(${q}) ${oneWord ? sql.fragment`~` : sql.fragment`!~`} ${ONE_WORD}`;
      // The one word of a one-word query, and whether a name is close to q, tested as <% does (which
      // the planner does not estimate from the statistics).
      const word = sql.fragment`substring(svc_fold(${q}) from '[[:alnum:]]+')`;
      const close = sql.fragment`word_similarity(svc_fold(${q}), p.search_name)
        >= current_setting('pg_trgm.word_similarity_threshold')::real`;
      // The names holding the terms of the app's names nearest to a one-word query (migration 0037:
      // its words, or its pairs of neighbouring words as "w1 w2"), each term tested once, however many
      // names hold it. A term's trigrams are a run of its names' own, so each holder is at least as
      // close as the term: no name is tested. The first holders in the terms' order, each name once
      // (a name may hold several such terms), a one-time filter `when` first.
      const holdersOfNearestTerms = (when: FragmentSqlToken, kind: 'words' | 'pairs') => {
        const [isKind, holders] =
          kind === 'words'
            ? [
                sql.fragment`strpos(v.term, ' ') = 0`,
                sql.fragment`select w.profile_pk as pk from profile_words w where ${inScope('w', scope)} and w.word = v.term`,
              ]
            : [
                sql.fragment`strpos(v.term, ' ') > 0`,
                sql.fragment`select w.profile_pk as pk from profile_word_pairs w where ${inScope('w', scope)} and w.pair = v.term`,
              ];
        return onlyIf(
          true,
          sql.fragment`
          select named.pk from (
            select distinct on (held.pk) held.pk, held.distance, held.term from (
              select t.pk, v.distance, v.term
              from (
                select v.term, svc_fold(${q}) <<-> v.term as distance from profile_vocabulary v
                where ${when} and ${inScope('v', scope)} and ${isKind} and svc_fold(${q}) <% v.term
                order by distance, v.term
              ) v
              cross join lateral (${holders}) t
              order by v.distance, v.term
              limit ${SEARCH_PROFILE_WORDS_READ}
            ) held
            order by held.pk, held.distance, held.term
          ) named
          order by named.distance, named.term, named.pk
          limit ${SEARCH_PROFILE_NEAREST}`,
        );
      };
      return db.any(sql.type(ProfileRow)`
        with worded as (
          -- One word of two characters or more, whatever surrounds it ("@rodri ": pg_trgm reads the
          -- words alone), a constant test: otherwise nothing is read. The names holding the words that
          -- start with it, in the words' order, the word itself ahead of the longer ones; each name
          -- once (it may hold several such words: maria92 María) and a match (a threshold raised above
          -- 2/3 would refuse two-letter prefixes).
          ${onlyIf(
            true,
            sql.fragment`
          select named.pk from (
            select w.profile_pk as pk, min(w.word) as first from (
              select w.profile_pk, w.word from profile_words w
              where ${inScope('w', scope)} and w.word like ${word} || '%'
              order by w.word
              limit ${SEARCH_PROFILE_WORDS_READ}
            ) w
            group by w.profile_pk
            order by first
            limit ${SEARCH_PROFILE_NEAREST}
          ) named
          join profiles p on p.pk = named.pk
          where ${close}`,
          )}
        ), typos as (
          -- When no word starts with it: the names holding the words nearest to it (a typo).
          ${holdersOfNearestTerms(sql.fragment`not exists (select from worded)`, 'words')}
        ), run_together as (
          -- When those are fewer: the names holding the pairs of neighbouring words nearest to it (two
          -- words run together, "jeanpierre", maybe with a typo).
          ${holdersOfNearestTerms(
            sql.fragment`not exists (select from worded) and (select count(*) from typos) < ${SEARCH_PROFILE_NEAREST}`,
            'pairs',
          )}
        ), candidates as (
          select pk from worded
          union
          select pk from typos
          union
          select pk from run_together
          union
          -- Several words (or one letter) walk the nearest names: one word never does, whatever it
          -- finds, since a walk to names that are not there reads the whole index (a one-time filter).
          ${onlyIf(false, nearest(sql.fragment``))}
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

    /** How many buzzes the app has (deleted ones aside), as the planner estimates it: counting reads them all. */
    buzzesEstimate: async (scope: Scope) => {
      const [explained] = await db.oneFirst(sql.type(Explained)`
        explain (format json) select from buzzes b where ${inScope('b', scope)} and b.deleted_at is null`);
      return explained!.Plan['Plan Rows'];
    },

    /**
     * Buzzes holding every word of q (accents and case ignored): the newest matches, best ranked
     * first, joined to their authors only once the page is cut.
     *
     * The newest matches come from whichever of two reads finds them cheaply. Words common enough in
     * the app's newest SEARCH_BUZZ_PROBE buzzes (walkFrom: the fewer, the bigger the app, `appBuzzes`
     * as the planner estimates it): its newest SEARCH_BUZZ_WALK buzzes tested in order, which stops
     * once it has the candidates. Others, or when that walk came short: the word index, which reads
     * every match. The planner cannot choose between them itself: it takes the words of a query
     * as independent, and words that go together (two of one language) match far more buzzes than it
     * expects, which made it fetch tens of thousands of matches for a page. So the probe decides, as
     * the search runs, in svc_search_buzzes (migration 0041), whose reads each have the one plan that
     * serves every app, made once a session.
     */
    searchBuzzes: (scope: Scope, q: string, limit: number, appBuzzes: number) =>
      db.any(sql.type(BuzzRow)`
        select pk, id, type, text, reactions, comments, created_at, author_pk, author_id, author_username
        from svc_search_buzzes(${scope.appId}, ${scope.mode}, ${q}, ${limit}, ${walkFrom(appBuzzes)},
                               ${SEARCH_BUZZ_PROBE}, ${SEARCH_BUZZ_WALK}, ${SEARCH_BUZZ_CANDIDATES})`),
  };
}
