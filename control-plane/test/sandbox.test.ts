/**
 * The test mode's sandbox against the real PostgreSQL: its documented sizes, counters that agree
 * with their rows, the same fixtures in every app (times relative to the seeding), accent-folded
 * search, and apps whose fixtures do not collide.
 */
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SANDBOX, socialSandbox } from '../src/modules/social/sandbox.js';
import { REACTION_KINDS, USERNAME_PATTERN } from '../src/modules/social/schema.js';
import { createSandbox } from '../src/platform/sandbox.js';
import { statementRecorder } from './statements.js';
import { createCustomer, startTestApp, type TestContext } from './support.js';

const { statements, interceptor } = statementRecorder();
const AT = new Date('2030-06-15T09:30:00.250Z');
const DAY_SECONDS = 86_400;

/** An app whose sandbox a test seeded, and the statements the seeding sent. */
interface Seeded {
  appId: string;
  sent: string[];
}

let ctx: TestContext;
/** Two apps seeded at the same time, and one an hour later. */
let first: Seeded;
let second: Seeded;
let later: Seeded;
let fixtures: Fixtures;

async function seededApp(at: Date): Promise<Seeded> {
  const { app } = await createCustomer(ctx.container);
  // A sandbox of the social part alone: the other parts have tests of their own.
  const sandbox = createSandbox({ pool: ctx.container.pool, clock: { now: () => at } });
  sandbox.register(socialSandbox);
  statements.length = 0;
  await sandbox.ensure({ appId: app.id, mode: 'test' });
  return { appId: app.id, sent: [...statements] };
}

beforeAll(async () => {
  ctx = await startTestApp({ interceptors: [interceptor] });
  first = await seededApp(AT);
  second = await seededApp(AT);
  later = await seededApp(new Date(AT.getTime() + 3_600_000));
  fixtures = await fixturesOf(first.appId);
});
afterAll(async () => {
  await ctx.close();
});

type Fixtures = Awaited<ReturnType<typeof fixturesOf>>;

/**
 * Everything seeded in an app, without what tells apps apart: ids lose their app tag, and times are
 * seconds before the seeding.
 */
async function fixturesOf(appId: string) {
  const pool = ctx.container.pool;
  const age = (column: string) =>
    sql.fragment`extract(epoch from s.seeded_at - ${sql.identifier(column.split('.'))})::int`;
  const untagged = (column: string) =>
    sql.fragment`regexp_replace(${sql.identifier(column.split('.'))}, '_[0-9a-f]{20}_', '_')`;
  // `a` is the profile each row belongs to (its author, reactor or follower).
  const ofApp = sql.fragment`join sandboxes s on s.app_id = a.app_id and s.part = 'social' where a.app_id = ${appId}`;
  return {
    profiles: await pool.any(sql.unsafe`
      select a.user_id, a.username, a.full_name, a.category, a.verified, a.followers, a.following, a.buzzes,
             a.sandbox, a.mode, ${age('a.created_at')} as age
      from profiles a ${ofApp} order by a.user_id`),
    buzzes: await pool.any(sql.unsafe`
      select ${untagged('b.id')} as id, a.user_id, b.type, b.text, b.reactions, b.comments, b.deleted_at,
             ${age('b.created_at')} as age
      from buzzes b join profiles a on a.pk = b.author_pk ${ofApp} order by b.id`),
    reactions: await pool.any(sql.unsafe`
      select ${untagged('b.id')} as buzz_id, a.user_id, r.kind, ${age('r.created_at')} as age
      from buzz_reactions r join buzzes b on b.pk = r.buzz_pk join profiles a on a.pk = r.profile_pk ${ofApp}
      order by b.id, a.user_id`),
    comments: await pool.any(sql.unsafe`
      select ${untagged('c.id')} as id, ${untagged('b.id')} as buzz_id, a.user_id, c.text,
             ${age('c.created_at')} as age
      from buzz_comments c join buzzes b on b.pk = c.buzz_pk join profiles a on a.pk = c.author_pk ${ofApp}
      order by c.id`),
    follows: await pool.any(sql.unsafe`
      select a.user_id as follower_id, followee.user_id as followee_id, ${age('f.created_at')} as age
      from follows f join profiles a on a.pk = f.follower_pk join profiles followee on followee.pk = f.followee_pk
      ${ofApp} order by a.user_id, followee.user_id`),
  };
}

const sandboxBuzzes = (appId: string) => sql.fragment`buzzes b where b.app_id = ${appId} and b.mode = 'test'`;

describe('the sandbox', () => {
  it('is seeded in a few bulk statements', () => {
    expect(first.sent.filter((statement) => statement.startsWith('insert'))).toEqual([
      expect.stringMatching(/^insert into profiles /),
      expect.stringMatching(/^insert into follows /),
      expect.stringMatching(/^insert into buzzes /),
      expect.stringMatching(/^insert into buzz_reactions /),
      expect.stringMatching(/^insert into buzz_comments /),
      expect.stringMatching(/^insert into sandboxes /),
    ]);
  });

  it('holds the documented sizes', async () => {
    const { profiles, buzzes, reactions, comments, follows } = fixtures;
    expect(SANDBOX).toMatchObject({ profiles: 40, verified: 8, buzzes: 3_000 });
    expect(profiles).toHaveLength(SANDBOX.profiles);
    expect(profiles.filter((profile) => profile.verified)).toHaveLength(SANDBOX.verified);
    expect(buzzes).toHaveLength(SANDBOX.buzzes);
    expect(reactions.length).toBeGreaterThan(SANDBOX.buzzes * 2);
    expect(reactions.length).toBeLessThan(SANDBOX.buzzes * SANDBOX.maxReactions);
    expect(comments.length).toBeGreaterThan(SANDBOX.buzzes / 2);
    expect(comments.length).toBeLessThan(SANDBOX.buzzes * SANDBOX.maxComments);
    expect(follows.length).toBeGreaterThanOrEqual(SANDBOX.profiles * SANDBOX.minFollowing);
    expect(follows.length).toBeLessThanOrEqual(SANDBOX.profiles * SANDBOX.maxFollowing);
    const seededAt = await ctx.container.pool.oneFirst(sql.type(z.object({ seeded_at: z.date() }))`
      select seeded_at from sandboxes where app_id = ${first.appId} and part = 'social'`);
    expect(seededAt).toEqual(AT);
  });

  it('has test-mode sandbox profiles with valid usernames, unique without regard to case', () => {
    for (const profile of fixtures.profiles) {
      expect(profile).toMatchObject({
        mode: 'test',
        sandbox: true,
        user_id: expect.stringMatching(/^sandbox-/),
      });
      expect(profile.username).toMatch(new RegExp(USERNAME_PATTERN));
      expect(profile.full_name).not.toBe('');
      expect(profile.category).not.toBe('');
    }
    const usernames = new Set(fixtures.profiles.map((profile) => profile.username.toLowerCase()));
    expect(usernames.size).toBe(SANDBOX.profiles);
  });

  it('writes in several languages and scripts', () => {
    const { profiles, buzzes } = fixtures;
    const text = [...profiles.map((p) => p.full_name), ...buzzes.map((b) => b.text)].join(' ');
    const scripts = [/[éèüöäñçãß]/, /\p{Script=Arabic}/u, /\p{Script=Devanagari}/u, /\p{Script=Hiragana}/u];
    for (const script of scripts) expect(text).toMatch(script);
    expect(new Set(buzzes.map((buzz) => buzz.text)).size).toBeGreaterThan(500);
  });

  it('spreads buzzes over the last 90 days, after their authors and before their reactions and comments', () => {
    const { profiles, buzzes, reactions, comments } = fixtures;
    const ages = buzzes.map((buzz) => buzz.age);
    expect(Math.min(...ages)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...ages)).toBeLessThanOrEqual(SANDBOX.days * DAY_SECONDS);
    expect(Math.max(...ages)).toBeGreaterThan((SANDBOX.days - 1) * DAY_SECONDS);
    const authorAge = new Map(profiles.map((profile) => [profile.user_id, profile.age]));
    expect(buzzes.filter((buzz) => buzz.age > authorAge.get(buzz.user_id)!)).toEqual([]);
    const buzzAge = new Map(buzzes.map((buzz) => [buzz.id, buzz.age]));
    const untimely = [...reactions, ...comments].filter(
      (reply) => reply.age < 0 || reply.age > buzzAge.get(reply.buzz_id)!,
    );
    expect(untimely).toEqual([]);
  });

  it('reacts with every kind', () => {
    expect(new Set(fixtures.reactions.map((reaction) => reaction.kind))).toEqual(new Set(REACTION_KINDS));
  });

  it('sets every counter to what its rows count, none of them trivial', async () => {
    const profileMismatches = await ctx.container.pool.anyFirst(sql.type(z.object({ user_id: z.string() }))`
      select p.user_id from profiles p
      where p.app_id = ${first.appId} and p.mode = 'test'
        and (p.followers <> (select count(*) from follows f where f.followee_pk = p.pk)
          or p.following <> (select count(*) from follows f where f.follower_pk = p.pk)
          or p.buzzes <> (select count(*) from buzzes b where b.author_pk = p.pk and b.deleted_at is null))`);
    expect(profileMismatches).toEqual([]);
    const buzzMismatches = await ctx.container.pool.anyFirst(sql.type(z.object({ id: z.string() }))`
      select b.id from ${sandboxBuzzes(first.appId)}
        and (b.reactions <> (select count(*) from buzz_reactions r where r.buzz_pk = b.pk)
          or b.comments <> (select count(*) from buzz_comments c where c.buzz_pk = b.pk))`);
    expect(buzzMismatches).toEqual([]);
    expect(fixtures.buzzes.filter((buzz) => buzz.deleted_at !== null)).toEqual([]);

    for (const counter of ['followers', 'following', 'buzzes'] as const) {
      expect(new Set(fixtures.profiles.map((profile) => profile[counter])).size, counter).toBeGreaterThan(3);
    }
    for (const counter of ['reactions', 'comments'] as const) {
      expect(new Set(fixtures.buzzes.map((buzz) => buzz[counter])).size, counter).toBeGreaterThan(3);
    }
  });

  it('is the same in every app, its times relative to the seeding', async () => {
    expect(await fixturesOf(second.appId)).toEqual(fixtures);
    expect(await fixturesOf(later.appId)).toEqual(fixtures);
  });

  it('is found by accent-folded search', async () => {
    const search = (q: string) =>
      ctx.container.pool.anyFirst(sql.type(z.object({ text: z.string() }))`
        select b.text from ${sandboxBuzzes(first.appId)}
          and b.deleted_at is null and b.search @@ plainto_tsquery('simple', svc_fold(${q}))`);
    const cafe = await search('cafe');
    expect(cafe.some((text) => text.includes('café'))).toBe(true);
    expect(await search('CAFÉ')).toEqual(cafe);
    expect((await search('muller')).some((text) => text.includes('Müller'))).toBe(true);
    expect((await search('manana')).some((text) => text.includes('Mañana'))).toBe(true);
  });

  it('gives each app ids of its own, apart from those newId makes', async () => {
    const ids = (appId: string) =>
      ctx.container.pool.anyFirst(sql.type(z.object({ id: z.string() }))`
        select b.id from ${sandboxBuzzes(appId)}
        union all
        select c.id from buzz_comments c join buzzes b on b.pk = c.buzz_pk where b.app_id = ${appId}`);
    const firstIds = await ids(first.appId);
    const secondIds = new Set(await ids(second.appId));
    // newId's random part is base62: never a "_" after "bz_sbx" or "cmt_sbx".
    for (const id of firstIds) expect(id).toMatch(/^(bz|cmt)_sbx_[0-9a-f]{20}_\d{5}$/);
    expect(firstIds.filter((id) => secondIds.has(id))).toEqual([]);
    const appTags = (of: Iterable<string>) => new Set([...of].map((id) => id.split('_')[2]));
    expect(appTags(firstIds).size).toBe(1);
    expect(appTags(secondIds).size).toBe(1);
    expect(appTags(firstIds)).not.toEqual(appTags(secondIds));
  });
});
