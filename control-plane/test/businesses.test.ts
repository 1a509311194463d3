import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUSINESS_LIMITS, CODE_LOOKUPS } from '../src/modules/orgs/business-schema.js';
import { type AppUser, appWithUsers, type Method } from './app-users.js';
import { startTestApp, type TestContext } from './support.js';

// Businesses through the API: roles and rights, codes, invites and join requests. The chat server's
// side (conversations, staff, bookmarks) is business-chat.test.ts.

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

const world = () => appWithUsers(ctx);

async function register(owner: AppUser, fields: object = {}) {
  const created = await owner.call('POST', '/v1/me/businesses', { name: 'Acme', ...fields });
  expect(created.statusCode, created.body).toBe(201);
  return created.json() as { id: string; code: string; inbox: { id: string } };
}

/** Invites a user (by their personal code) and has them accept: their member id. */
async function onTeam(by: AppUser, business: string, who: AppUser, role: 'admin' | 'staff' = 'staff') {
  const invited = await by.call('POST', `/v1/me/businesses/${business}/members`, {
    code: await who.code(),
    role,
  });
  expect(invited.statusCode, invited.body).toBe(201);
  const accepted = await who.call('POST', `/v1/me/org-invites/${invited.json().id}/accept`);
  expect(accepted.statusCode, accepted.body).toBe(200);
  return invited.json().id as string;
}

const errorOf = (response: { statusCode: number; json(): { error: { code?: string } } }) => [
  response.statusCode,
  response.json().error.code,
];

describe('personal codes', () => {
  it('are made once, regenerated on demand, and the old one then finds nobody', async () => {
    const app = await world();
    const [ana, bo] = [await app.user('ana'), await app.user('bo')];
    const code = await ana.code();
    expect(code).toMatch(/^[23456789ABCDEFGHJKMNPQRSTVWXYZ]{8}$/);
    expect(await ana.code()).toBe(code);
    const lookup = await bo.call('GET', `/v1/me/codes/${code.toLowerCase()}`);
    expect(lookup.json()).toMatchObject({ kind: 'member', may_message: true, business: null });
    expect((await ana.call('GET', `/v1/me/codes/${code}`)).json()).toMatchObject({
      may_message: false,
      reason: 'own_code',
    });
    const renewed = (await ana.call('POST', '/v1/me/code')).json().code;
    expect(renewed).not.toBe(code);
    expect(errorOf(await bo.call('GET', `/v1/me/codes/${code}`))).toEqual([404, 'CODE_NOT_FOUND']);
    const chat = await bo.call('POST', `/v1/me/codes/${renewed}/chat`);
    expect(chat.statusCode, chat.body).toBe(200);
    expect(chat.json()).toMatchObject({ kind: 'member', conversation_id: null });
    expect(chat.json().jid).toMatch(/^[a-z0-9]{10}\.ana@/);
  });

  it('are another app’s nothing: its codes answer like unknown ones', async () => {
    const [one, two] = [await world(), await world()];
    const code = await (await one.user('ana')).code();
    const stranger = await two.user('bo');
    expect(errorOf(await stranger.call('GET', `/v1/me/codes/${code}`))).toEqual([404, 'CODE_NOT_FOUND']);
    expect((await stranger.call('GET', '/v1/me/codes/not-a-code')).statusCode).toBe(422);
  });

  it(`are looked up at most ${CODE_LOOKUPS.limit} times an hour per user`, async () => {
    const app = await world();
    const prober = await app.user('prober');
    for (let i = 0; i < CODE_LOOKUPS.limit; i++)
      expect((await prober.call('GET', '/v1/me/codes/ZZZZZZZZ')).statusCode).toBe(404);
    const refused = await prober.call('GET', '/v1/me/codes/ZZZZZZZZ');
    expect(refused.statusCode).toBe(429);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // A real code answers the same while the user is over the cap.
    const code = await (await app.user('ana')).code();
    expect((await prober.call('GET', `/v1/me/codes/${code}`)).statusCode).toBe(429);
    expect((await (await app.user('other')).call('GET', `/v1/me/codes/${code}`)).statusCode).toBe(200);
  });
});

describe('registering and managing a business', () => {
  it('makes the caller its owner, with a code that finds it', async () => {
    const app = await world();
    const [owner, customer] = [await app.user('owner'), await app.user('customer')];
    const business = await register(owner, { inbox_line: 'We answer within the hour' });
    expect(business).toMatchObject({
      status: 'active',
      my_role: 'owner',
      access: 'code',
      calls: true,
      chat: true,
      front_desk: 'staff',
      staff_names: 'hidden',
      inbox: { name: 'Acme', line: 'We answer within the hour' },
      team_count: 1,
    });
    expect(business.code).toMatch(/^[23456789ABCDEFGHJKMNPQRSTVWXYZ]{8}$/);
    const read = (await owner.call('GET', `/v1/me/businesses/${business.id}`)).json();
    expect(read.people.items).toEqual([
      expect.objectContaining({
        user_id: 'owner',
        role: 'owner',
        status: 'active',
        inbox: { may_reply: true, nick: 'Acme (1)' },
      }),
    ]);
    expect(
      (await owner.call('GET', '/v1/me/businesses')).json().items.map((b: { id: string }) => b.id),
    ).toEqual([business.id]);
    expect((await customer.call('GET', `/v1/me/codes/${business.code}`)).json()).toMatchObject({
      kind: 'business',
      name: 'Acme',
      may_message: true,
      reason: null,
      business: { id: business.id, inbox: { name: 'Acme', line: 'We answer within the hour' } },
    });
  });

  it('changes settings, asks for a greeting with the greeting front desk, and draws a new code', async () => {
    const app = await world();
    const owner = await app.user('owner');
    const business = await register(owner);
    const path = `/v1/me/businesses/${business.id}`;
    expect((await owner.call('PATCH', path, { front_desk: 'greeting' })).statusCode).toBe(422);
    const changed = await owner.call('PATCH', path, {
      name: 'Acme Ltd',
      access: 'invited',
      calls: false,
      front_desk: 'greeting',
      greeting: 'Hello! How can we help?',
      staff_names: 'shown',
      new_code: true,
    });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json()).toMatchObject({
      name: 'Acme Ltd',
      access: 'invited',
      calls: false,
      staff_names: 'shown',
    });
    expect(changed.json().code).not.toBe(business.code);
    expect(errorOf(await owner.call('GET', `/v1/me/codes/${business.code}`))).toEqual([
      404,
      'CODE_NOT_FOUND',
    ]);
    expect((await owner.call('PATCH', path, {})).statusCode).toBe(422);
  });

  it(`lets a user own at most ${BUSINESS_LIMITS.businessesPerOwner} businesses, hand-overs included`, async () => {
    const app = await world();
    const [owner, other] = [await app.user('owner'), await app.user('other')];
    for (let i = 0; i < BUSINESS_LIMITS.businessesPerOwner; i++) await register(owner);
    expect(errorOf(await owner.call('POST', '/v1/me/businesses', { name: 'One more' }))).toEqual([
      409,
      'LIMIT_REACHED',
    ]);
    const theirs = await register(other);
    const ownerId = await onTeam(other, theirs.id, owner, 'admin');
    expect(
      errorOf(
        await other.call('PATCH', `/v1/me/businesses/${theirs.id}/members/${ownerId}`, { role: 'owner' }),
      ),
    ).toEqual([409, 'LIMIT_REACHED']);
  });

  it('is deleted by its owner only: every identity locked, its code gone', async () => {
    const app = await world();
    const [owner, admin, stranger] = [await app.user('owner'), await app.user('admin'), await app.user('x')];
    const business = await register(owner);
    await onTeam(owner, business.id, admin, 'admin');
    const path = `/v1/me/businesses/${business.id}`;
    expect(errorOf(await admin.call('DELETE', path))).toEqual([403, 'BUSINESS_ROLE']);
    expect((await stranger.call('DELETE', path)).statusCode).toBe(404);
    expect((await owner.call('DELETE', path)).json()).toEqual({ ok: true, id: business.id });
    expect((await owner.call('GET', path)).statusCode).toBe(404);
    expect(errorOf(await stranger.call('GET', `/v1/me/codes/${business.code}`))).toEqual([
      404,
      'CODE_NOT_FOUND',
    ]);
    const memberships = (await admin.call('GET', '/v1/me/org-memberships')).json();
    expect(memberships.items).toEqual([]);
    // The app's server still sees it, deleted, with its records.
    expect((await app.asApp('GET', `/v1/orgs/${business.id}`)).json()).toMatchObject({
      kind: 'business',
      status: 'deleted',
    });
  });

  it('is read but never changed through the app’s org routes', async () => {
    const app = await world();
    const owner = await app.user('owner');
    const business = await register(owner);
    expect((await app.asApp('GET', `/v1/orgs/${business.id}`)).json()).toMatchObject({ kind: 'business' });
    for (const [method, url, body] of [
      ['PATCH', `/v1/orgs/${business.id}`, { name: 'Mine now' }],
      ['POST', '/v1/orgs', { externalId: business.id, name: 'Mine now' }],
      ['PUT', `/v1/orgs/${business.id}/members/x`, {}],
      ['PUT', `/v1/orgs/${business.id}/teams/x`, { name: 'x' }],
      ['DELETE', `/v1/orgs/${business.id}`, undefined],
    ] as const)
      expect(errorOf(await app.asApp(method, url, body)), `${method} ${url}`).toEqual([409, 'BUSINESS_ORG']);
    expect((await app.asApp('GET', `/v1/orgs/${business.id}/usage`)).statusCode).toBe(200);
  });
});

describe('roles and rights', () => {
  it('follow the table: owner, admin and staff, and nobody else', async () => {
    const app = await world();
    const [owner, admin, staff, stranger] = [
      await app.user('owner'),
      await app.user('admin'),
      await app.user('staff'),
      await app.user('stranger'),
    ];
    const business = await register(owner);
    const base = `/v1/me/businesses/${business.id}`;
    const adminId = await onTeam(owner, business.id, admin, 'admin');
    const staffId = await onTeam(owner, business.id, staff);
    const reads = [`${base}`, `${base}/shortcuts`, `${base}/inboxes`, `${base}/requests`, `${base}/members`];
    for (const url of reads) {
      expect((await owner.call('GET', url)).statusCode, url).toBe(200);
      expect((await admin.call('GET', url)).statusCode, url).toBe(200);
      expect(errorOf(await staff.call('GET', url)), url).toEqual([403, 'BUSINESS_ROLE']);
      expect((await stranger.call('GET', url)).statusCode, url).toBe(404);
    }
    // Staff may make a group; a stranger may not even see the business.
    expect(
      (await staff.call('POST', `${base}/groups`, { name: 'Night shift', members: [adminId] })).statusCode,
    ).toBe(201);
    expect((await stranger.call('POST', `${base}/groups`, { name: 'x', members: [] })).statusCode).toBe(404);
    // Staff change nothing of the business.
    expect(errorOf(await staff.call('PATCH', base, { name: 'Mine' }))).toEqual([403, 'BUSINESS_ROLE']);
    expect(errorOf(await staff.call('PUT', `${base}/shortcuts`, { shortcuts: [] }))).toEqual([
      403,
      'BUSINESS_ROLE',
    ]);
    expect(errorOf(await staff.call('POST', `${base}/members`, { code: await stranger.code() }))).toEqual([
      403,
      'BUSINESS_ROLE',
    ]);
    // Admins manage staff, not admins, and invite no admins; only the owner deletes.
    expect((await admin.call('PATCH', `${base}/members/${staffId}`, { title: 'Support' })).statusCode).toBe(
      200,
    );
    expect(errorOf(await admin.call('PATCH', `${base}/members/${staffId}`, { role: 'admin' }))).toEqual([
      403,
      'BUSINESS_ROLE',
    ]);
    expect(
      errorOf(await admin.call('POST', `${base}/members`, { code: await stranger.code(), role: 'admin' })),
    ).toEqual([403, 'BUSINESS_ROLE']);
    const ownerId = (await owner.call('GET', `${base}/members?status=active`))
      .json()
      .items.find((person: { role: string }) => person.role === 'owner').id;
    // The spec's page size: at most 100.
    expect((await owner.call('GET', `${base}/members?limit=100`)).statusCode).toBe(200);
    expect((await owner.call('GET', `${base}/members?limit=101`)).statusCode).toBe(422);
    expect(errorOf(await admin.call('PATCH', `${base}/members/${ownerId}`, { status: 'disabled' }))).toEqual([
      403,
      'BUSINESS_ROLE',
    ]);
    expect(errorOf(await owner.call('DELETE', `${base}/members/${ownerId}`))).toEqual([409, 'OWNER_STAYS']);
    // A hand-over changes nothing else.
    expect(
      (await owner.call('PATCH', `${base}/members/${adminId}`, { role: 'owner', status: 'disabled' }))
        .statusCode,
    ).toBe(422);
    // The owner hands over: the new owner deletes, the old one (now admin) may not.
    expect((await owner.call('PATCH', `${base}/members/${adminId}`, { role: 'owner' })).json()).toMatchObject(
      {
        role: 'owner',
      },
    );
    expect((await owner.call('GET', base)).json().my_role).toBe('admin');
    expect(errorOf(await owner.call('DELETE', base))).toEqual([403, 'BUSINESS_ROLE']);
    expect((await admin.call('DELETE', base)).statusCode).toBe(200);
  });

  it('refuse every owner-or-admin write to staff, and hide the business from strangers', async () => {
    const app = await world();
    const [owner, admin, staff, other, stranger, asker] = [
      await app.user('owner'),
      await app.user('admin'),
      await app.user('staff'),
      await app.user('other'),
      await app.user('stranger'),
      await app.user('asker'),
    ];
    const business = await register(owner);
    const base = `/v1/me/businesses/${business.id}`;
    await onTeam(owner, business.id, admin, 'admin');
    const staffId = await onTeam(owner, business.id, staff);
    const otherId = await onTeam(owner, business.id, other);
    const request = (await asker.call('POST', `/v1/me/codes/${business.code}/join`)).json().member_id;
    const inbox = `${base}/inboxes/${business.inbox.id}`;
    const writes: [Method, string, object | undefined][] = [
      ['PATCH', inbox, { line: 'Hi' }],
      ['PUT', `${inbox}/staff`, { staff: [{ member_id: staffId, may_reply: true }] }],
      ['POST', `${base}/conversations`, { code: await stranger.code() }],
      ['PATCH', `${base}/members/${otherId}`, { title: 'Boss' }],
      ['POST', `${base}/requests/${request}/reject`, undefined],
      ['DELETE', `${base}/members/${otherId}`, undefined],
    ];
    for (const [method, url, body] of writes) {
      expect(errorOf(await staff.call(method, url, body)), `${method} ${url}`).toEqual([
        403,
        'BUSINESS_ROLE',
      ]);
      expect((await stranger.call(method, url, body)).statusCode, `${method} ${url}`).toBe(404);
    }
    for (const [method, url, body] of writes) {
      const allowed = await admin.call(method, url, body);
      expect(allowed.statusCode, `${method} ${url}: ${allowed.body}`).toBe(200);
    }
    // The conversations: those who work the inbox; not staff taken off it.
    expect((await owner.call('GET', `${base}/conversations`)).statusCode).toBe(200);
    expect((await staff.call('GET', `${base}/conversations`)).statusCode).toBe(200);
    await owner.call('PUT', `${inbox}/staff`, { staff: [] });
    expect(errorOf(await staff.call('GET', `${base}/conversations`))).toEqual([403, 'BUSINESS_ROLE']);
    // Anyone but the owner may leave.
    expect((await staff.call('DELETE', `${base}/members/${staffId}`)).statusCode).toBe(200);
    expect((await staff.call('GET', `${base}/conversations`)).statusCode).toBe(404);
  });

  it('keep a disabled person’s place in the inbox through a staff change', async () => {
    const app = await world();
    const [owner, staff] = [await app.user('owner'), await app.user('staff')];
    const business = await register(owner);
    const base = `/v1/me/businesses/${business.id}`;
    const staffId = await onTeam(owner, business.id, staff);
    await owner.call('PATCH', `${base}/members/${staffId}`, { status: 'disabled' });
    const put = await owner.call('PUT', `${base}/inboxes/${business.inbox.id}/staff`, {
      staff: [{ member_id: staffId, may_reply: false }],
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().staff).toEqual([{ member_id: staffId, may_reply: false, nick: 'Acme (2)' }]);
  });

  it('answer the spec’s gone operations with 410 and the alternative', async () => {
    const app = await world();
    const owner = await app.user('owner');
    const business = await register(owner);
    const created = await owner.call('POST', `/v1/me/businesses/${business.id}/inboxes`, { name: 'Second' });
    expect(created.statusCode).toBe(410);
    expect(created.json().error).toMatchObject({ type: 'gone', code: 'GONE' });
    expect(created.json().error.message).toContain('PATCH /v1/me/businesses/{org}/inboxes/{inbox}');
    const closed = await owner.call(
      'DELETE',
      `/v1/me/businesses/${business.id}/inboxes/${business.inbox.id}`,
    );
    expect(closed.statusCode).toBe(410);
    expect(closed.json().error.message).toContain('"chat": false');
  });
});

describe('shortcuts', () => {
  it(`hold at most ${BUSINESS_LIMITS.shortcuts}, keys unique in any case, and are replaced whole`, async () => {
    const app = await world();
    const owner = await app.user('owner');
    const business = await register(owner);
    const path = `/v1/me/businesses/${business.id}/shortcuts`;
    const many = Array.from({ length: BUSINESS_LIMITS.shortcuts }, (_, i) => ({
      key: `k${i}`,
      text: `Reply ${i}`,
    }));
    expect((await owner.call('PUT', path, { shortcuts: many })).statusCode).toBe(200);
    expect((await owner.call('GET', path)).json().shortcuts).toHaveLength(BUSINESS_LIMITS.shortcuts);
    const tooMany = await owner.call('PUT', path, { shortcuts: [...many, { key: 'one', text: 'more' }] });
    expect(tooMany.statusCode).toBe(422);
    const twice = await owner.call('PUT', path, {
      shortcuts: [
        { key: 'hi', text: 'a' },
        { key: 'HI', text: 'b' },
      ],
    });
    expect(twice.json().error.fields).toEqual([expect.objectContaining({ field: 'shortcuts.1.key' })]);
    const long = 'x'.repeat(BUSINESS_LIMITS.shortcutTextMax + 1);
    expect((await owner.call('PUT', path, { shortcuts: [{ key: 'x', text: long }] })).statusCode).toBe(422);
    expect(
      (await owner.call('PUT', path, { shortcuts: [{ key: 'hours', text: 'Nine to five' }] })).json(),
    ).toEqual({
      shortcuts: [{ key: 'hours', text: 'Nine to five' }],
    });
    // Unchanged after a refused replacement.
    expect((await owner.call('GET', path)).json().shortcuts).toHaveLength(1);
  });
});

describe('invites and join requests', () => {
  it('show in the invitee’s list; a decline leaves the business unable to invite or reach them', async () => {
    const app = await world();
    const [owner, ana] = [await app.user('owner'), await app.user('ana')];
    const business = await register(owner);
    const base = `/v1/me/businesses/${business.id}`;
    await ana.call('PUT', '/v1/me/phone', { phone: '+14155550123' });
    const invited = await owner.call('POST', `${base}/members`, { phone: '+14155550123', title: 'Support' });
    expect(invited.json()).toMatchObject({ user_id: 'ana', status: 'invited', role: 'staff', inbox: null });
    expect(errorOf(await owner.call('POST', `${base}/members`, { code: await ana.code() }))).toEqual([
      409,
      'ALREADY_ON_TEAM',
    ]);
    const invites = (await ana.call('GET', '/v1/me/org-invites')).json();
    expect(invites.items).toEqual([
      expect.objectContaining({
        id: invited.json().id,
        role: 'staff',
        kind: 'business',
        org: expect.objectContaining({ name: 'Acme' }),
      }),
    ]);
    // An invite is nobody's identity yet.
    expect((await ana.call('GET', '/v1/me/org-memberships')).json().items).toEqual([]);
    const declined = await ana.call('POST', `/v1/me/org-invites/${invited.json().id}/decline`);
    expect(declined.json()).toMatchObject({ status: 'declined', member_id: null });
    expect((await ana.call('GET', '/v1/me/org-invites')).json().items).toEqual([]);
    expect(errorOf(await owner.call('POST', `${base}/members`, { code: await ana.code() }))).toEqual([
      403,
      'PERSON_DECLINED',
    ]);
    expect(errorOf(await owner.call('POST', `${base}/conversations`, { code: await ana.code() }))).toEqual([
      403,
      'PERSON_DECLINED',
    ]);
    // Asking to join lifts it.
    const asked = await ana.call('POST', `/v1/me/codes/${business.code}/join`);
    expect(asked.json()).toMatchObject({ status: 'requested' });
    expect((await owner.call('POST', `${base}/conversations`, { code: await ana.code() })).statusCode).toBe(
      200,
    );
  });

  it('are answered once: another user’s invite is a 404', async () => {
    const app = await world();
    const [owner, ana, bo] = [await app.user('owner'), await app.user('ana'), await app.user('bo')];
    const business = await register(owner);
    const invited = await owner.call('POST', `/v1/me/businesses/${business.id}/members`, {
      code: await ana.code(),
    });
    expect((await bo.call('POST', `/v1/me/org-invites/${invited.json().id}/accept`)).statusCode).toBe(404);
    expect((await ana.call('POST', `/v1/me/org-invites/${invited.json().id}/accept`)).statusCode).toBe(200);
    expect((await ana.call('POST', `/v1/me/org-invites/${invited.json().id}/accept`)).statusCode).toBe(404);
    expect((await ana.call('GET', '/v1/me/org-memberships')).json().items).toEqual([
      expect.objectContaining({
        id: invited.json().id,
        role: 'staff',
        org: expect.objectContaining({ kind: 'business' }),
      }),
    ]);
  });

  it('are approved or rejected by the owner and admins', async () => {
    const app = await world();
    const [owner, ana, bo] = [await app.user('owner'), await app.user('ana'), await app.user('bo')];
    const business = await register(owner);
    const base = `/v1/me/businesses/${business.id}`;
    const [fromAna, fromBo] = [
      (await ana.call('POST', `/v1/me/codes/${business.code}/join`)).json(),
      (await bo.call('POST', `/v1/me/codes/${business.code}/join`)).json(),
    ];
    expect((await ana.call('POST', `/v1/me/codes/${business.code}/join`)).json()).toEqual(fromAna);
    const asking = (await owner.call('GET', `${base}/requests`)).json().items;
    expect(asking.map((p: { user_id: string }) => p.user_id).sort()).toEqual(['ana', 'bo']);
    expect((await ana.call('POST', `${base}/requests/${fromAna.member_id}/approve`)).statusCode).toBe(404);
    const approved = await owner.call('POST', `${base}/requests/${fromAna.member_id}/approve`);
    expect(approved.json()).toMatchObject({ status: 'active', inbox: { may_reply: true } });
    expect((await owner.call('POST', `${base}/requests/${fromBo.member_id}/reject`)).statusCode).toBe(200);
    expect((await owner.call('POST', `${base}/requests/${fromBo.member_id}/approve`)).statusCode).toBe(404);
    expect((await owner.call('GET', `${base}/requests`)).json().items).toEqual([]);
    expect((await ana.call('POST', `/v1/me/codes/${business.code}/join`)).json()).toMatchObject({
      status: 'member',
    });
  });
});

describe('access', () => {
  it('says who may start a chat: anyone with the code, invited customers, nobody', async () => {
    const app = await world();
    const [owner, ana, bo] = [await app.user('owner'), await app.user('ana'), await app.user('bo')];
    const business = await register(owner, { access: 'invited' });
    const lookup = await ana.call('GET', `/v1/me/codes/${business.code}`);
    expect(lookup.json()).toMatchObject({ may_message: false, reason: 'access_invited' });
    expect(errorOf(await ana.call('POST', `/v1/me/codes/${business.code}/chat`))).toEqual([
      403,
      'BUSINESS_ACCESS',
    ]);
    expect(
      (await owner.call('POST', `/v1/me/businesses/${business.id}/conversations`, { code: await ana.code() }))
        .statusCode,
    ).toBe(200);
    const reopened = await ana.call('POST', `/v1/me/codes/${business.code}/chat`, { name: 'Ana' });
    expect(reopened.json()).toMatchObject({ kind: 'business', created: false });
    await owner.call('PATCH', `/v1/me/businesses/${business.id}`, { access: 'nobody' });
    expect(errorOf(await ana.call('POST', `/v1/me/codes/${business.code}/chat`))).toEqual([
      403,
      'BUSINESS_ACCESS',
    ]);
    await owner.call('PATCH', `/v1/me/businesses/${business.id}`, { access: 'code', chat: false });
    expect((await bo.call('GET', `/v1/me/codes/${business.code}`)).json().reason).toBe('chat_off');
    expect(errorOf(await bo.call('POST', `/v1/me/codes/${business.code}/chat`))).toEqual([
      403,
      'BUSINESS_CHAT_OFF',
    ]);
    await owner.call('PATCH', `/v1/me/businesses/${business.id}`, { chat: true });
    const opened = await bo.call('POST', `/v1/me/codes/${business.code}/chat`, { name: 'Bo' });
    expect(opened.json()).toMatchObject({ kind: 'business', created: true });
    // Back to invited customers only: one who came by the code is not one of them.
    await owner.call('PATCH', `/v1/me/businesses/${business.id}`, { access: 'invited' });
    expect(errorOf(await bo.call('POST', `/v1/me/codes/${business.code}/chat`))).toEqual([
      403,
      'BUSINESS_ACCESS',
    ]);
    expect((await ana.call('POST', `/v1/me/codes/${business.code}/chat`, { name: 'Ana' })).statusCode).toBe(
      200,
    );
    // Once the business opens the chat with them itself, they are one of its invited customers.
    const openedByBusiness = await owner.call('POST', `/v1/me/businesses/${business.id}/conversations`, {
      code: await bo.code(),
    });
    expect(openedByBusiness.json()).toMatchObject({ created: false });
    expect((await bo.call('GET', `/v1/me/codes/${business.code}`)).json().may_message).toBe(true);
    expect((await bo.call('POST', `/v1/me/codes/${business.code}/chat`, { name: 'Bo' })).statusCode).toBe(
      200,
    );
    await owner.call('PATCH', `/v1/me/businesses/${business.id}`, { access: 'code' });
    expect(
      (await bo.call('POST', `/v1/me/codes/${business.code}/chat`, { name: 'Acme (1)' })).statusCode,
    ).toBe(422);
    // Also in full width, which ejabberd reads as the same name.
    const wide = await bo.call('POST', `/v1/me/codes/${business.code}/chat`, {
      name: 'Acme\uFF08\uFF11\uFF09',
    });
    expect(wide.json().error.fields).toEqual([expect.objectContaining({ field: 'name' })]);
    const listed = (await owner.call('GET', `/v1/me/businesses/${business.id}/conversations`)).json();
    expect(listed.items.map((c: { customer_name: string }) => c.customer_name).sort()).toEqual([
      'Bo',
      'Customer',
    ]);
  });
});
