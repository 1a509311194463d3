import { type Interceptor, sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CODE_LOOKUPS } from '../src/modules/orgs/business-schema.js';
import { CIRCLE_LIMITS } from '../src/modules/orgs/circle-schema.js';
import { type AppUser, appWithUsers } from './app-users.js';
import { startTestApp, type TestContext } from './support.js';

// Circles through the API: join rules, roles and every "who" rule, members, rooms and boards, limits.
// What the chat server enforces (boards, blocks, archives, bookmarks) is circle-chat.test.ts.

let ctx: TestContext;
/** Run once right after the next read of a circle with the caller's place, before the operation goes on. */
let afterCircleRead: (() => Promise<unknown>) | null = null;
const circleRead: Interceptor = {
  name: 'after-circle-read',
  afterQueryExecution: async (_context, query) => {
    const then = afterCircleRead;
    if (then && /for key share of o, c/.test(query.sql)) {
      afterCircleRead = null;
      await then();
    }
    return null;
  },
};
beforeAll(async () => {
  ctx = await startTestApp({ interceptors: [circleRead] });
});
afterAll(async () => {
  await ctx.close();
});

type Circle = {
  id: string;
  code: string;
  boards: { id: string; name: string }[];
  rooms: { id: string; name: string; jid: string }[];
  me: { member_id: string; role: string; muted_boards: string[]; joined_rooms: string[] };
};

const errorOf = (response: { statusCode: number; json(): { error?: { code?: string } } }) => [
  response.statusCode,
  response.json().error?.code,
];

async function start(owner: AppUser, fields: object = {}) {
  const created = await owner.call('POST', '/v1/me/circles', { name: 'Book club', ...fields });
  expect(created.statusCode, created.body).toBe(201);
  return created.json() as Circle;
}

/** Joins by code; the answer's status. */
async function join(who: AppUser, circle: Circle) {
  const joined = await who.call('POST', `/v1/me/codes/${circle.code}/join`);
  expect(joined.statusCode, joined.body).toBe(200);
  return joined.json() as { status: string; member_id: string; kind: string; org_id: string };
}

/** A circle (open) with its owner, an admin, a mod and a member, each in it. */
async function club(fields: object = {}) {
  const app = await appWithUsers(ctx);
  const [owner, admin, mod, member] = await Promise.all(
    ['owner', 'admin', 'mod', 'member'].map((id) => app.user(id)),
  );
  const circle = await start(owner!, { join_rule: 'open', ...fields });
  const ids: Record<string, string> = {};
  for (const [name, user] of [
    ['admin', admin],
    ['mod', mod],
    ['member', member],
  ] as const) {
    ids[name] = (await join(user!, circle)).member_id;
    if (name !== 'member') {
      const made = await owner!.call('PATCH', `/v1/me/circles/${circle.id}/members/${ids[name]}`, {
        role: name,
      });
      expect(made.statusCode, made.body).toBe(200);
    }
  }
  const base = `/v1/me/circles/${circle.id}`;
  return { app, owner: owner!, admin: admin!, mod: mod!, member: member!, circle, ids, base };
}

describe('starting a circle', () => {
  it('makes its code, an Announcements board and a General room, with the creator as owner', async () => {
    const app = await appWithUsers(ctx);
    const ana = await app.user('ana');
    const circle = await start(ana);
    expect(circle).toMatchObject({
      name: 'Book club',
      join_rule: 'approval',
      members_create_rooms: false,
      calls: true,
      member_count: 1,
      my_role: 'owner',
      boards: [{ name: 'Announcements', kind: 'board', archived: false }],
      rooms: [{ name: 'General', kind: 'room', open: true, auto_join: true }],
    });
    expect(circle.code).toMatch(/^[23456789ABCDEFGHJKMNPQRSTVWXYZ]{8}$/);
    expect(circle.me).toMatchObject({ role: 'owner', muted_boards: [], joined_rooms: [circle.rooms[0]!.id] });
    expect(circle.rooms[0]!.jid).toMatch(/^[a-z0-9]{10}\.\+[a-z0-9]{12}\.r\+[a-z0-9]{10}@/);
    const mine = (await ana.call('GET', '/v1/me/circles')).json();
    expect(mine.items.map((item: { id: string }) => item.id)).toEqual([circle.id]);
    // Its identity is one of the user's org memberships, with chat.
    const memberships = (await ana.call('GET', '/v1/me/org-memberships')).json().items;
    expect(memberships).toEqual([expect.objectContaining({ id: circle.me.member_id })]);
  });

  it(`lets a user own ${CIRCLE_LIMITS.circlesPerOwner} circles and not one more`, async () => {
    const app = await appWithUsers(ctx);
    const ana = await app.user('ana');
    for (let i = 0; i < CIRCLE_LIMITS.circlesPerOwner; i++) await start(ana, { name: `Circle ${i}` });
    const refused = await ana.call('POST', '/v1/me/circles', { name: 'One more' });
    expect(errorOf(refused)).toEqual([409, 'LIMIT_REACHED']);
    const page = (await ana.call('GET', '/v1/me/circles?limit=15')).json();
    expect(page.items).toHaveLength(15);
    const rest = (await ana.call('GET', `/v1/me/circles?limit=15&cursor=${page.next_cursor}`)).json();
    expect(rest.items).toHaveLength(CIRCLE_LIMITS.circlesPerOwner - 15);
    expect(rest.next_cursor).toBeNull();
  });

  it('refuses bad input with the error body, and nobody else sees the circle', async () => {
    const app = await appWithUsers(ctx);
    const [ana, bo] = [await app.user('ana'), await app.user('bo')];
    const bad = await ana.call('POST', '/v1/me/circles', { name: '', join_rule: 'anyone' });
    expect(bad.statusCode).toBe(422);
    const fields = new Set(bad.json().error.fields.map((field: { field: string }) => field.field));
    expect([...fields].sort()).toEqual(['join_rule', 'name']);
    const circle = await start(ana);
    expect(errorOf(await bo.call('GET', `/v1/me/circles/${circle.id}`))).toEqual([404, undefined]);
    expect(errorOf(await bo.call('PATCH', `/v1/me/circles/${circle.id}`, { name: 'Mine' }))).toEqual([
      404,
      undefined,
    ]);
    // The app's server sees it among its orgs, and cannot change it there.
    const asOrg = await app.asApp('PATCH', `/v1/orgs/${circle.id}`, { name: 'Taken' });
    expect(errorOf(asOrg)).toEqual([409, 'CIRCLE_ORG']);
  });
});

describe('join rules', () => {
  it('lets a double-tapped join in once: every tap answers the same member', async () => {
    const app = await appWithUsers(ctx);
    const circle = await start(await app.user('owner'), { join_rule: 'open' });
    const taps = await Promise.all(
      Array.from({ length: 6 }, async () =>
        (await app.user('bo')).call('POST', `/v1/me/codes/${circle.code}/join`),
      ),
    );
    expect(taps.map((tap) => tap.statusCode)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(new Set(taps.map((tap) => tap.json().member_id)).size).toBe(1);
  });

  it('open: joins at once, into the auto-join rooms', async () => {
    const app = await appWithUsers(ctx);
    const [ana, bo] = [await app.user('ana'), await app.user('bo')];
    const circle = await start(ana, { join_rule: 'open' });
    expect((await bo.call('GET', `/v1/me/codes/${circle.code}`)).json()).toMatchObject({
      kind: 'circle',
      name: 'Book club',
      may_message: false,
      reason: 'circle',
      circle: { id: circle.id, join_rule: 'open', member_count: 1, my_status: 'none' },
    });
    expect(await join(bo, circle)).toMatchObject({ status: 'member', kind: 'circle', org_id: circle.id });
    const seen = (await bo.call('GET', `/v1/me/circles/${circle.id}`)).json();
    expect(seen).toMatchObject({ my_role: 'member', member_count: 2 });
    expect(seen.me.joined_rooms).toEqual([circle.rooms[0]!.id]);
    // Joining again is no change; chatting by the code is not how a circle is reached.
    expect((await join(bo, circle)).status).toBe('member');
    expect(errorOf(await bo.call('POST', `/v1/me/codes/${circle.code}/chat`))).toEqual([409, 'CIRCLE_CODE']);
  });

  it('approval: a request admins approve, or reject (its asker sees it, and may ask again)', async () => {
    const app = await appWithUsers(ctx);
    const [ana, bo, cy] = [await app.user('ana'), await app.user('bo'), await app.user('cy')];
    const circle = await start(ana);
    const asked = await join(bo, circle);
    expect(asked.status).toBe('requested');
    expect((await bo.call('GET', `/v1/me/codes/${circle.code}`)).json().circle.my_status).toBe('requested');
    expect(errorOf(await bo.call('GET', `/v1/me/circles/${circle.id}`))).toEqual([404, undefined]);
    const pending = (await ana.call('GET', `/v1/me/circles/${circle.id}/members?status=pending`)).json();
    expect(pending.items).toEqual([expect.objectContaining({ id: asked.member_id, status: 'requested' })]);
    const approved = await ana.call(
      'POST',
      `/v1/me/circles/${circle.id}/requests/${asked.member_id}/approve`,
    );
    expect(approved.json()).toMatchObject({ status: 'active', role: 'member' });
    expect((await bo.call('GET', `/v1/me/circles/${circle.id}`)).statusCode).toBe(200);

    const other = await join(cy, circle);
    const rejected = await ana.call('POST', `/v1/me/circles/${circle.id}/requests/${other.member_id}/reject`);
    expect(rejected.json()).toMatchObject({ status: 'rejected' });
    expect((await cy.call('GET', `/v1/me/codes/${circle.code}`)).json().circle.my_status).toBe('rejected');
    // A request is decided once.
    expect(
      errorOf(await ana.call('POST', `/v1/me/circles/${circle.id}/requests/${other.member_id}/approve`)),
    ).toEqual([404, undefined]);
    expect((await join(cy, circle)).status).toBe('requested');
  });

  it(`counts invites against the ${CODE_LOOKUPS.limit} code lookups a user makes an hour`, async () => {
    const app = await appWithUsers(ctx);
    const prober = await app.user('prober');
    const circle = await start(prober);
    const invite = (phone: string) => prober.call('POST', `/v1/me/circles/${circle.id}/members`, { phone });
    // Each phone answers whether it is a user of the app: a lookup like a code's.
    for (let i = 0; i < CODE_LOOKUPS.limit; i++)
      expect(errorOf(await invite(`+1555${String(i).padStart(7, '0')}`))).toEqual([404, 'PERSON_NOT_FOUND']);
    const refused = await invite('+15559999999');
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('invite: a stranger is refused; the invited join by the code or accept the invite', async () => {
    const app = await appWithUsers(ctx);
    const [ana, bo, cy, dee] = await Promise.all(['ana', 'bo', 'cy', 'dee'].map((id) => app.user(id)));
    const circle = await start(ana!, { join_rule: 'invite' });
    expect(errorOf(await bo!.call('POST', `/v1/me/codes/${circle.code}/join`))).toEqual([
      403,
      'CIRCLE_INVITE_ONLY',
    ]);
    const invited = await ana!.call('POST', `/v1/me/circles/${circle.id}/members`, {
      code: await bo!.code(),
    });
    expect(invited.statusCode, invited.body).toBe(201);
    expect(invited.json()).toMatchObject({ status: 'invited', role: 'member' });
    expect(
      errorOf(await ana!.call('POST', `/v1/me/circles/${circle.id}/members`, { code: await bo!.code() })),
    ).toEqual([409, 'ALREADY_MEMBER']);
    expect((await join(bo!, circle)).status).toBe('member');

    await ana!.call('POST', `/v1/me/circles/${circle.id}/members`, { code: await cy!.code(), role: 'mod' });
    const invites = (await cy!.call('GET', '/v1/me/org-invites')).json().items;
    expect(invites).toEqual([
      expect.objectContaining({
        kind: 'circle',
        role: 'mod',
        org: expect.objectContaining({ id: circle.id }),
      }),
    ]);
    const accepted = await cy!.call('POST', `/v1/me/org-invites/${invites[0].id}/accept`);
    expect(accepted.json()).toMatchObject({ status: 'accepted' });
    expect((await cy!.call('GET', `/v1/me/circles/${circle.id}`)).json().my_role).toBe('mod');

    await ana!.call('POST', `/v1/me/circles/${circle.id}/members`, { code: await dee!.code() });
    const [invite] = (await dee!.call('GET', '/v1/me/org-invites')).json().items;
    expect((await dee!.call('POST', `/v1/me/org-invites/${invite.id}/decline`)).json().status).toBe(
      'declined',
    );
    expect(errorOf(await dee!.call('POST', `/v1/me/codes/${circle.code}/join`))).toEqual([
      403,
      'CIRCLE_INVITE_ONLY',
    ]);
  });

  it('a blocked member cannot rejoin by any rule until restored; a removed one rejoins by the rule', async () => {
    const { circle, ids, base, owner, member, mod } = await club();
    const blocked = await owner.call('PATCH', `${base}/members/${ids.member}`, { status: 'blocked' });
    expect(blocked.json()).toMatchObject({ status: 'blocked' });
    expect(errorOf(await member.call('GET', base))).toEqual([404, undefined]);
    expect(errorOf(await member.call('POST', `/v1/me/codes/${circle.code}/join`))).toEqual([
      403,
      'CIRCLE_BLOCKED',
    ]);
    expect(errorOf(await owner.call('POST', `${base}/members`, { code: await member.code() }))).toEqual([
      409,
      'MEMBER_BLOCKED',
    ]);
    const listed = (await owner.call('GET', `${base}/members?status=blocked`)).json().items;
    expect(listed.map((row: { id: string }) => row.id)).toEqual([ids.member]);
    const restored = await owner.call('PATCH', `${base}/members/${ids.member}`, { status: 'active' });
    expect(restored.json()).toMatchObject({ status: 'active' });
    expect((await member.call('GET', base)).json().me.joined_rooms).toEqual([circle.rooms[0]!.id]);

    expect((await owner.call('DELETE', `${base}/members/${ids.mod}`)).statusCode).toBe(200);
    expect(errorOf(await mod.call('GET', base))).toEqual([404, undefined]);
    const back = await join(mod, circle);
    expect(back).toMatchObject({ status: 'member', member_id: ids.mod });
    // Back as a member: the role they had is not kept.
    expect((await mod.call('GET', base)).json().my_role).toBe('member');
  });
});

describe('who may do what', () => {
  it('admins change the circle; the owner alone deletes it; the owner cannot leave', async () => {
    const { base, owner, admin, mod, member, ids } = await club();
    for (const who of [mod, member])
      expect(errorOf(await who.call('PATCH', base, { join_rule: 'invite' }))).toEqual([403, 'CIRCLE_ROLE']);
    const changed = await admin.call('PATCH', base, {
      name: 'Readers',
      members_create_rooms: true,
      calls: false,
    });
    expect(changed.json()).toMatchObject({ name: 'Readers', members_create_rooms: true, calls: false });
    expect(errorOf(await admin.call('DELETE', base))).toEqual([403, 'CIRCLE_ROLE']);
    expect(errorOf(await owner.call('POST', `${base}/leave`))).toEqual([409, 'OWNER_STAYS']);
    // Calls off: the circle's identities get no call token.
    const [membership] = (await member.call('GET', '/v1/me/org-memberships')).json().items;
    const call = await member.call('POST', `/v1/me/org-memberships/${membership.id}/call-token`, {
      with: ids.admin,
    });
    expect(call.statusCode).toBe(403);
  });

  it('admins and mods list people, with q and status, paged; members may not', async () => {
    const { base, owner, mod, member, ids } = await club();
    expect(errorOf(await member.call('GET', `${base}/members`))).toEqual([403, 'CIRCLE_ROLE']);
    const all = (await mod.call('GET', `${base}/members`)).json();
    expect(all.items).toHaveLength(4);
    const page = (await mod.call('GET', `${base}/members?limit=3`)).json();
    const rest = (await mod.call('GET', `${base}/members?limit=3&cursor=${page.next_cursor}`)).json();
    expect([...page.items, ...rest.items].map((row: { id: string }) => row.id)).toEqual(
      all.items.map((row: { id: string }) => row.id),
    );
    const found = (await owner.call('GET', `${base}/members?q=MEM`)).json().items;
    expect(found.map((row: { id: string }) => row.id)).toEqual([ids.member]);
    expect((await owner.call('GET', `${base}/members?status=removed`)).json().items).toEqual([]);
    expect((await owner.call('GET', `${base}/members?status=gone`)).statusCode).toBe(422);
    // The spec's page size: at most 100.
    expect((await owner.call('GET', `${base}/members?limit=100`)).statusCode).toBe(200);
    expect((await owner.call('GET', `${base}/members?limit=101`)).statusCode).toBe(422);
    // A NUL in the search (found by the contract fuzz: PostgreSQL's text cannot hold one) is refused.
    expect((await owner.call('GET', `${base}/members?q=a%00b`)).statusCode).toBe(422);
  });

  it('roles: admins set mods and members, only the owner sets admins or hands over; mods block nobody', async () => {
    const { base, owner, admin, mod, member, ids } = await club();
    expect(errorOf(await mod.call('PATCH', `${base}/members/${ids.member}`, { status: 'blocked' }))).toEqual([
      403,
      'CIRCLE_ROLE',
    ]);
    expect(errorOf(await admin.call('PATCH', `${base}/members/${ids.member}`, { role: 'admin' }))).toEqual([
      403,
      'CIRCLE_ROLE',
    ]);
    expect(errorOf(await admin.call('PATCH', `${base}/members/${ids.admin}`, { role: 'member' }))).toEqual([
      403,
      'CIRCLE_ROLE',
    ]);
    expect((await admin.call('PATCH', `${base}/members/${ids.member}`, { role: 'mod' })).json().role).toBe(
      'mod',
    );
    expect(errorOf(await admin.call('DELETE', `${base}/members/${ids.admin}`))).toEqual([403, 'CIRCLE_ROLE']);
    const me = (await owner.call('GET', base)).json().me.member_id;
    expect(errorOf(await admin.call('PATCH', `${base}/members/${me}`, { status: 'blocked' }))).toEqual([
      409,
      'OWNER_STAYS',
    ]);
    // A hand-over: the new owner, and the old one an admin who may now leave.
    const handed = await owner.call('PATCH', `${base}/members/${ids.admin}`, { role: 'owner' });
    expect(handed.json().role).toBe('owner');
    expect((await owner.call('GET', base)).json().my_role).toBe('admin');
    expect((await owner.call('POST', `${base}/leave`)).statusCode).toBe(200);
    expect(errorOf(await member.call('DELETE', base))).toEqual([403, 'CIRCLE_ROLE']);
    expect((await admin.call('DELETE', base)).statusCode).toBe(200);
    // Deleted: every identity locked, the circle gone from everyone's list.
    expect((await mod.call('GET', '/v1/me/circles')).json().items).toEqual([]);
    expect((await mod.call('GET', '/v1/me/org-memberships')).json().items).toEqual([]);
  });
});

describe('every operation refuses a caller who may not', () => {
  it('answers 403 CIRCLE_ROLE to each, and changes nothing', async () => {
    const { base, owner, mod, member, ids, app } = await club();
    const asker = await app.user('asker');
    await owner.call('PATCH', base, { join_rule: 'approval' });
    const request = (
      await asker.call('POST', `/v1/me/codes/${(await owner.call('GET', base)).json().code}/join`)
    ).json();
    const room = (await owner.call('POST', `${base}/rooms`, { kind: 'room', name: 'Owners' })).json();
    const attempts: [AppUser, 'POST' | 'PATCH' | 'DELETE' | 'GET', string, object?][] = [
      [mod, 'PATCH', base, { name: 'Mods' }],
      [member, 'DELETE', base],
      [member, 'GET', `${base}/members`],
      [mod, 'POST', `${base}/members`, { code: await asker.code() }],
      [mod, 'PATCH', `${base}/members/${ids.member}`, { role: 'mod' }],
      [mod, 'DELETE', `${base}/members/${ids.member}`],
      [mod, 'POST', `${base}/requests/${request.member_id}/approve`],
      [mod, 'POST', `${base}/requests/${request.member_id}/reject`],
      [member, 'POST', `${base}/rooms`, { kind: 'room', name: 'Mine' }],
      [member, 'PATCH', `${base}/rooms/${room.id}`, { name: 'Mine' }],
      [member, 'DELETE', `${base}/rooms/${room.id}`],
      [member, 'POST', `${base}/rooms/${room.id}/members`, { member_id: ids.member }],
      [member, 'DELETE', `${base}/rooms/${room.id}/members/${ids.mod}`],
    ];
    for (const [who, method, url, body] of attempts)
      expect(errorOf(await who.call(method, url, body)), `${method} ${url}`).toEqual([403, 'CIRCLE_ROLE']);
    const after = (await owner.call('GET', base)).json();
    expect(after).toMatchObject({ name: 'Book club', member_count: 4 });
    expect(after.rooms.map((each: { id: string }) => each.id)).toContain(room.id);
    expect((await owner.call('GET', `${base}/members?status=pending`)).json().items).toHaveLength(1);
  });
});

describe('moderation’s edges', () => {
  it('keeps a member blocked meanwhile blocked when they leave: the leave finds them blocked', async () => {
    const { base, owner, member, ids } = await club();
    // A block commits while the leave has read the circle and the member's place (the block's own
    // write of the member's status: the API's block would wait on the circle the leave holds).
    afterCircleRead = () =>
      ctx.container.pool.query(
        sql.unsafe`update org_members set status = 'blocked' where id = ${ids.member!}`,
      );
    expect(errorOf(await member.call('POST', `${base}/leave`))).toEqual([404, undefined]);
    expect(afterCircleRead).toBeNull();
    const [row] = (await owner.call('GET', `${base}/members?status=blocked`)).json().items;
    expect(row).toMatchObject({ id: ids.member, status: 'blocked' });
  });

  it('blocks only active members, removes no blocked one, and lists people to admins and mods only', async () => {
    const { base, owner, member, mod, ids, app } = await club();
    const invitee = await app.user('invitee');
    const invited = (await owner.call('POST', `${base}/members`, { code: await invitee.code() })).json();
    expect(
      errorOf(await owner.call('PATCH', `${base}/members/${invited.id}`, { status: 'blocked' })),
    ).toEqual([409, 'NOT_ACTIVE']);
    await owner.call('PATCH', `${base}/members/${ids.member}`, { status: 'blocked' });
    expect(errorOf(await owner.call('DELETE', `${base}/members/${ids.member}`))).toEqual([
      409,
      'MEMBER_BLOCKED',
    ]);
    // Nor out of one room: that would lift the ban there.
    const general = (await owner.call('GET', base)).json().rooms[0].id;
    expect(errorOf(await owner.call('DELETE', `${base}/rooms/${general}/members/${ids.member}`))).toEqual([
      409,
      'NOT_ACTIVE',
    ]);
    expect(errorOf(await owner.call('PATCH', `${base}/members/${invited.id}`, { status: 'active' }))).toEqual(
      [409, 'NOT_BLOCKED'],
    );
    // The org directory of a circle identity is the member list: admins and mods only.
    const [own] = (await mod.call('GET', '/v1/me/org-memberships')).json().items;
    expect((await mod.call('GET', `/v1/me/org-memberships/${own.id}/directory`)).statusCode).toBe(200);
    await owner.call('PATCH', `${base}/members/${ids.mod}`, { role: 'member' });
    expect(errorOf(await mod.call('GET', `/v1/me/org-memberships/${own.id}/directory`))).toEqual([
      403,
      'CIRCLE_ROLE',
    ]);
    expect(member).toBeDefined();
  });

  it('a mod takes no one of their rank or above out of a room, and closed rooms show to their people', async () => {
    const { base, owner, admin, mod, member, ids } = await club();
    const room = (
      await owner.call('POST', `${base}/rooms`, { kind: 'room', name: 'Staff', open: false })
    ).json();
    await owner.call('POST', `${base}/rooms/${room.id}/members`, { member_id: ids.admin });
    expect(errorOf(await mod.call('DELETE', `${base}/rooms/${room.id}/members/${ids.admin}`))).toEqual([
      403,
      'CIRCLE_ROLE',
    ]);
    const listed = async (who: AppUser) =>
      (await who.call('GET', base)).json().rooms.map((each: { id: string }) => each.id) as string[];
    expect(await listed(admin)).toContain(room.id);
    expect(await listed(mod)).toContain(room.id);
    expect(await listed(member)).not.toContain(room.id);
  });

  it('a request made while the circle took requests is let in once the circle is open', async () => {
    const app = await appWithUsers(ctx);
    const [ana, bo] = [await app.user('ana'), await app.user('bo')];
    const circle = await start(ana);
    expect((await join(bo, circle)).status).toBe('requested');
    await ana.call('PATCH', `/v1/me/circles/${circle.id}`, { join_rule: 'open' });
    expect((await join(bo, circle)).status).toBe('member');
  });

  it(`closes a room of ${CIRCLE_LIMITS.membersToClose} members, not one more`, async () => {
    const { base, owner, circle } = await club();
    const general = circle.rooms[0]!.id;
    // The room's other members as rows (active members of the circle, never online).
    await ctx.container.pool.query(sql.unsafe`
      with people as (
        insert into org_members (id, org_id, ext_id, identity_key, user_id, role, status, created_at, updated_at)
        select 'mem_r' || n || ${circle.id}, ${circle.id}, 'mem_r' || n || ${circle.id},
               substr(md5('r' || n || ${circle.id}), 1, 10), 'room-' || n, 'member', 'active', now(), now()
        from generate_series(1, ${CIRCLE_LIMITS.membersToClose - 3}) n
        returning id)
      insert into circle_room_members (room_id, member_id, joined_at) select ${general}, id, now() from people`);
    const tooMany = await owner.call('PATCH', `${base}/rooms/${general}`, { open: false });
    expect(errorOf(tooMany)).toEqual([409, 'ROOM_TOO_BIG']);
    await ctx.container.pool.query(
      sql.unsafe`delete from circle_room_members where room_id = ${general} and member_id = ${`mem_r1${circle.id}`}`,
    );
    const closing = await owner.call('PATCH', `${base}/rooms/${general}`, { open: false });
    expect(closing.statusCode, closing.body).toBe(200);
  });
});

describe('rooms and boards', () => {
  it('boards by admins and mods; rooms by them, or by members when the circle lets them', async () => {
    const { base, admin, mod, member } = await club();
    expect(errorOf(await member.call('POST', `${base}/rooms`, { kind: 'board', name: 'News' }))).toEqual([
      403,
      'CIRCLE_ROLE',
    ]);
    expect(errorOf(await member.call('POST', `${base}/rooms`, { kind: 'room', name: 'Chat' }))).toEqual([
      403,
      'CIRCLE_ROLE',
    ]);
    const board = await mod.call('POST', `${base}/rooms`, { kind: 'board', name: 'News' });
    expect(board.statusCode, board.body).toBe(201);
    expect(board.json()).toMatchObject({ kind: 'board', open: true, auto_join: true });
    expect(
      (await mod.call('POST', `${base}/rooms`, { kind: 'board', name: 'X', open: false })).statusCode,
    ).toBe(422);
    await admin.call('PATCH', base, { members_create_rooms: true });
    const room = await member.call('POST', `${base}/rooms`, { kind: 'room', name: 'Chat', open: false });
    expect(room.json()).toMatchObject({ kind: 'room', open: false, auto_join: false });
    const seen = (await member.call('GET', base)).json();
    expect(seen.boards.map((b: { name: string }) => b.name)).toEqual(['Announcements', 'News']);
    expect(seen.me.joined_rooms).toContain(room.json().id);
  });

  it('leave a board to the mods once its maker is a member again; a room stays its maker’s', async () => {
    const { base, owner, admin, mod, ids } = await club({ members_create_rooms: true });
    const board = (await mod.call('POST', `${base}/rooms`, { kind: 'board', name: 'News' })).json();
    const room = (await mod.call('POST', `${base}/rooms`, { kind: 'room', name: 'Chat' })).json();
    expect((await owner.call('PATCH', `${base}/members/${ids.mod}`, { role: 'member' })).statusCode).toBe(
      200,
    );
    for (const [method, path, payload] of [
      ['PATCH', `${base}/rooms/${board.id}`, { name: 'Mine' }],
      ['POST', `${base}/rooms/${board.id}/members`, { member_id: ids.admin }],
      ['DELETE', `${base}/rooms/${board.id}`, undefined],
    ] as const)
      expect(errorOf(await mod.call(method, path, payload)), `${method} ${path}`).toEqual([
        403,
        'CIRCLE_ROLE',
      ]);
    expect((await mod.call('PATCH', `${base}/rooms/${room.id}`, { name: 'Ours' })).statusCode).toBe(200);
    expect((await admin.call('DELETE', `${base}/rooms/${board.id}`)).statusCode).toBe(200);
  });

  it('joins open rooms only, leaves rooms but never a board (which it mutes)', async () => {
    const { base, mod, member, circle } = await club();
    const open = (await mod.call('POST', `${base}/rooms`, { kind: 'room', name: 'Open' })).json();
    const closed = (
      await mod.call('POST', `${base}/rooms`, { kind: 'room', name: 'Shut', open: false })
    ).json();
    expect((await member.call('POST', `${base}/rooms/${open.id}/join`)).json().me.joined_rooms).toContain(
      open.id,
    );
    expect(errorOf(await member.call('POST', `${base}/rooms/${closed.id}/join`))).toEqual([
      403,
      'ROOM_CLOSED',
    ]);
    const board = circle.boards[0]!.id;
    expect(errorOf(await member.call('POST', `${base}/rooms/${board}/join`))).toEqual([409, 'BOARD']);
    expect(errorOf(await member.call('POST', `${base}/rooms/${board}/leave`))).toEqual([
      409,
      'BOARD_NOT_LEFT',
    ]);
    const muted = await member.call('POST', `${base}/rooms/${board}/mute`, { muted: true });
    expect(muted.json().me.muted_boards).toEqual([board]);
    expect(errorOf(await member.call('POST', `${base}/rooms/${open.id}/mute`, { muted: true }))).toEqual([
      409,
      'ROOM_NOT_MUTED',
    ]);
    const unmuted = await member.call('POST', `${base}/rooms/${board}/mute`, { muted: false });
    expect(unmuted.json().me.muted_boards).toEqual([]);
    const left = await member.call('POST', `${base}/rooms/${open.id}/leave`);
    expect(left.json().me.joined_rooms).not.toContain(open.id);
  });

  it('mods or a room’s creator add people; mods alone take them out; archived rooms take nothing', async () => {
    const { base, admin, mod, member, ids, owner } = await club();
    await admin.call('PATCH', base, { members_create_rooms: true });
    const mine = (
      await member.call('POST', `${base}/rooms`, { kind: 'room', name: 'Mine', open: false })
    ).json();
    const theirs = (
      await mod.call('POST', `${base}/rooms`, { kind: 'room', name: 'Mods', open: false })
    ).json();
    expect(
      (await member.call('POST', `${base}/rooms/${mine.id}/members`, { member_id: ids.admin })).statusCode,
    ).toBe(200);
    expect(
      errorOf(await member.call('POST', `${base}/rooms/${theirs.id}/members`, { member_id: ids.admin })),
    ).toEqual([403, 'CIRCLE_ROLE']);
    expect(errorOf(await member.call('DELETE', `${base}/rooms/${mine.id}/members/${ids.admin}`))).toEqual([
      403,
      'CIRCLE_ROLE',
    ]);
    expect((await owner.call('DELETE', `${base}/rooms/${mine.id}/members/${ids.admin}`)).statusCode).toBe(
      200,
    );
    expect((await admin.call('GET', base)).json().me.joined_rooms).not.toContain(mine.id);
    expect(
      errorOf(await mod.call('POST', `${base}/rooms/${theirs.id}/members`, { member_id: 'mem_nobody' })),
    ).toEqual([404, undefined]);

    const renamed = await member.call('PATCH', `${base}/rooms/${mine.id}`, { name: 'Ours', open: true });
    expect(renamed.json()).toMatchObject({ name: 'Ours', open: true });
    expect(errorOf(await member.call('PATCH', `${base}/rooms/${theirs.id}`, { name: 'Taken' }))).toEqual([
      403,
      'CIRCLE_ROLE',
    ]);
    expect((await mod.call('DELETE', `${base}/rooms/${mine.id}`)).statusCode).toBe(200);
    const after = (await owner.call('GET', base)).json();
    expect(after.rooms.map((room: { id: string }) => room.id)).not.toContain(mine.id);
    expect(errorOf(await owner.call('POST', `${base}/rooms/${mine.id}/join`))).toEqual([
      409,
      'ROOM_ARCHIVED',
    ]);
    expect(errorOf(await owner.call('PATCH', `${base}/rooms/${mine.id}`, { name: 'Again' }))).toEqual([
      409,
      'ROOM_ARCHIVED',
    ]);
  });

  it(`holds ${CIRCLE_LIMITS.roomsPerCircle} rooms and boards, archived ones included, and not one more`, async () => {
    const app = await appWithUsers(ctx);
    const ana = await app.user('ana');
    const circle = await start(ana);
    const base = `/v1/me/circles/${circle.id}`;
    for (let i = 2; i < CIRCLE_LIMITS.roomsPerCircle; i++) {
      const made = await ana.call('POST', `${base}/rooms`, { kind: 'room', name: `Room ${i}` });
      expect(made.statusCode, made.body).toBe(201);
      if (i === 2) await ana.call('DELETE', `${base}/rooms/${made.json().id}`);
    }
    expect(errorOf(await ana.call('POST', `${base}/rooms`, { kind: 'board', name: 'One more' }))).toEqual([
      409,
      'LIMIT_REACHED',
    ]);
  });
});

describe('a circle’s size', () => {
  it(`holds ${CIRCLE_LIMITS.membersPerCircle} people, the removed and the turned down not counted`, async () => {
    const app = await appWithUsers(ctx);
    const [ana, bo, cy] = [await app.user('ana'), await app.user('bo'), await app.user('cy')];
    const circle = await start(ana, { join_rule: 'open' });
    // Everyone but one place, as rows (10,000 joins through the API are the bench's).
    await ctx.container.pool.query(sql.unsafe`
      insert into org_members (id, org_id, ext_id, identity_key, user_id, role, status, created_at, updated_at)
      select 'mem_fill' || n || ${circle.id}, ${circle.id}, 'mem_fill' || n || ${circle.id},
             substr(md5(n::text || ${circle.id}), 1, 10), 'filler-' || n, 'member',
             case when n <= 5 then 'removed' else 'active' end, now(), now()
      from generate_series(1, ${CIRCLE_LIMITS.membersPerCircle + 3}) n`);
    expect((await join(bo, circle)).status).toBe('member');
    expect(errorOf(await cy.call('POST', `/v1/me/codes/${circle.code}/join`))).toEqual([
      409,
      'LIMIT_REACHED',
    ]);
  });
});
