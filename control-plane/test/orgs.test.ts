import { type Interceptor, sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORG_LIMITS } from '../src/modules/orgs/schema.js';
import { callWithKey, createCustomer, startTestApp, type TestContext } from './support.js';

/** Run once right after the next read of a user's own membership, before the operation goes on. */
let afterMembershipRead: (() => Promise<unknown>) | null = null;
const membershipRead: Interceptor = {
  name: 'after-membership-read',
  afterQueryExecution: async (_context, query) => {
    const then = afterMembershipRead;
    if (then && query.sql.includes('org_chat_key') && query.sql.includes('m.user_id =')) {
      afterMembershipRead = null;
      await then();
    }
    return null;
  },
};

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp({ interceptors: [membershipRead] });
});
afterAll(async () => {
  await ctx.close();
});

async function customer() {
  const made = await createCustomer(ctx.container);
  const call = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
    callWithKey(ctx.app, made.token, method, url, payload);
  /** A new org with a given external id, checked to be created. */
  const org = async (externalId: string, fields: object = {}) => {
    const created = await call('POST', '/v1/orgs', { externalId, name: `Org ${externalId}`, ...fields });
    expect(created.statusCode, created.body).toBe(201);
    return created.json();
  };
  return { ...made, call, org };
}

const setCount = (orgId: string, column: 'member_count' | 'team_count', value: number) =>
  ctx.container.pool.query(
    sql.unsafe`update orgs set ${sql.identifier([column])} = ${value} where id = ${orgId}`,
  );

describe('POST /v1/orgs and /v1/orgs/{org}', () => {
  it('creates an org by externalId, then updates the same one; writes are priced', async () => {
    const app = await customer();
    const created = await app.call('POST', '/v1/orgs', { externalId: 'Acme-HQ', name: 'Acme' });
    expect(created.statusCode, created.body).toBe(201);
    expect(Number(created.headers['x-svc-cost-usd'])).toBeGreaterThan(0);
    expect(created.json()).toMatchObject({
      external_id: 'Acme-HQ',
      name: 'Acme',
      logo_url: null,
      policy: 'anyone',
      chat: true,
      status: 'active',
      member_count: 0,
      team_count: 0,
      deleted_at: null,
    });
    const updated = await app.call('POST', '/v1/orgs', {
      externalId: 'Acme-HQ',
      name: 'Acme Inc.',
      policy: 'teams',
      logo_url: 'https://cdn.example.com/acme.png',
    });
    expect(updated.statusCode, updated.body).toBe(200);
    expect(updated.json()).toMatchObject({
      id: created.json().id,
      name: 'Acme Inc.',
      policy: 'teams',
      chat: true,
    });
    const read = (await app.call('GET', '/v1/orgs/Acme-HQ')).json();
    expect(read).toMatchObject({
      id: created.json().id,
      logo_url: 'https://cdn.example.com/acme.png',
      members: { items: [], next_cursor: null },
      teams: { items: [], next_cursor: null },
    });
    // The externalId is case-sensitive, like every id of the app's own.
    expect((await app.call('GET', '/v1/orgs/acme-hq')).statusCode).toBe(404);
  });

  it('answers a retried create with the same Idempotency-Key as it answered the first', async () => {
    const app = await customer();
    const create = () =>
      ctx.app.inject({
        method: 'POST',
        url: '/v1/orgs',
        headers: { authorization: `Bearer ${app.token}`, 'idempotency-key': 'create-retry-1' },
        payload: { externalId: 'retried', name: 'Retried' },
      });
    const first = await create();
    const again = await create();
    expect(first.statusCode, first.body).toBe(201);
    expect(again.statusCode).toBe(201);
    expect(again.json()).toEqual(first.json());
  });

  it('refuses what is not an org, field by field', async () => {
    const app = await customer();
    const refused = async (payload: object, field: string) => {
      const answer = await app.call('POST', '/v1/orgs', payload);
      expect(answer.statusCode, answer.body).toBe(422);
      expect(answer.json().error.fields.map((f: { field: string }) => f.field)).toContain(field);
    };
    await refused({ name: 'No id' }, 'externalId');
    await refused({ externalId: 'x' }, 'name');
    await refused({ externalId: 'x', name: 'X', policy: 'everyone' }, 'policy');
    await refused({ externalId: 'x', name: 'X', logo_url: 'http://cdn.example.com/x.png' }, 'logo_url');
    await refused({ externalId: 'x', name: ' padded ' }, 'name');
    await refused({ externalId: 'x', name: 'X', extra: 1 }, 'extra');
    await app.org('x');
    expect((await app.call('PATCH', '/v1/orgs/x', {})).statusCode).toBe(422);
    expect((await app.call('PATCH', '/v1/orgs/x', { status: 'deleted' })).statusCode).toBe(422);
  });

  it('keeps every org to its own app: another app’s is a 404 on every route', async () => {
    const owner = await customer();
    const other = await customer();
    await owner.org('shared-name');
    for (const [method, url, payload] of [
      ['GET', '/v1/orgs/shared-name', undefined],
      ['PATCH', '/v1/orgs/shared-name', { name: 'Taken' }],
      ['DELETE', '/v1/orgs/shared-name', undefined],
      ['GET', '/v1/orgs/shared-name/members', undefined],
      ['PUT', '/v1/orgs/shared-name/members/m1', {}],
      ['PUT', '/v1/orgs/shared-name/teams/t1', { name: 'T' }],
    ] as const) {
      const answer = await other.call(method, url, payload);
      expect(answer.statusCode, `${method} ${url}`).toBe(404);
    }
    // The same externalId is free in another app.
    await other.org('shared-name');
    expect((await owner.call('GET', '/v1/orgs/shared-name')).json().name).toBe('Org shared-name');
  });

  it('suspends and restores, changes the policy, turns chat off', async () => {
    const app = await customer();
    await app.org('school');
    const changed = await app.call('PATCH', '/v1/orgs/school', {
      status: 'suspended',
      chat: false,
      policy: 'admins',
    });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json()).toMatchObject({ status: 'suspended', chat: false, policy: 'admins' });
    expect(
      (await app.call('PATCH', '/v1/orgs/school', { status: 'active', logo_url: null })).json(),
    ).toMatchObject({
      status: 'active',
      chat: false,
      logo_url: null,
    });
  });

  it('deletes an org, keeps its records, and re-creates its externalId only when asked', async () => {
    const app = await customer();
    const first = await app.org('gone');
    await app.call('PUT', '/v1/orgs/gone/members/ana', {});
    const deleted = await app.call('DELETE', '/v1/orgs/gone');
    expect(deleted.json()).toEqual({ ok: true, id: 'gone' });
    const kept = (await app.call('GET', '/v1/orgs/gone')).json();
    expect(kept).toMatchObject({ id: first.id, status: 'deleted', member_count: 1 });
    expect(kept.members.items.map((m: { ext_id: string }) => m.ext_id)).toEqual(['ana']);
    expect(kept.deleted_at).toBe(ctx.clock.now().toISOString());
    for (const [method, url, payload] of [
      ['PATCH', '/v1/orgs/gone', { name: 'Back' }],
      ['PUT', '/v1/orgs/gone/members/bo', {}],
      ['PUT', '/v1/orgs/gone/teams/t', { name: 'T' }],
      ['POST', '/v1/orgs', { externalId: 'gone', name: 'Again' }],
    ] as const) {
      const answer = await app.call(method, url, payload);
      expect(answer.statusCode, `${method} ${url}`).toBe(409);
      expect(answer.json().error.code).toBe('ORG_DELETED');
    }
    expect((await app.call('DELETE', '/v1/orgs/gone')).json().error.code).toBe('ORG_DELETED');
    const again = await app.call('POST', '/v1/orgs', {
      externalId: 'gone',
      name: 'Again',
      replace_deleted: true,
    });
    expect(again.statusCode, again.body).toBe(201);
    expect(again.json().id).not.toBe(first.id);
    expect((await app.call('GET', '/v1/orgs/gone')).json()).toMatchObject({
      id: again.json().id,
      member_count: 0,
    });
  });

  it('lists the app’s orgs newest first, by page, and by status', async () => {
    const app = await customer();
    for (const name of ['o1', 'o2', 'o3']) {
      await app.org(name);
      ctx.clock.advance(1_000);
    }
    await app.call('PATCH', '/v1/orgs/o2', { status: 'suspended' });
    const first = (await app.call('GET', '/v1/orgs?limit=2')).json();
    expect(first.items.map((o: { external_id: string }) => o.external_id)).toEqual(['o3', 'o2']);
    const second = (await app.call('GET', `/v1/orgs?limit=2&cursor=${first.next_cursor}`)).json();
    expect(second).toMatchObject({ items: [{ external_id: 'o1' }], next_cursor: null });
    const suspended = (await app.call('GET', '/v1/orgs?status=suspended')).json();
    expect(suspended.items.map((o: { external_id: string }) => o.external_id)).toEqual(['o2']);
    expect((await app.call('GET', '/v1/orgs?cursor=forged')).statusCode).toBe(422);
  });

  it(`holds ${ORG_LIMITS.orgsPerApp.toLocaleString('en')} live orgs per app and mode`, async () => {
    const app = await customer();
    const { appId, mode } = { appId: app.app.id, mode: 'test' };
    await ctx.container.pool.query(sql.unsafe`
      insert into orgs (id, app_id, mode, external_id, kind, chat_key, name, policy, chat_enabled, status,
                        created_at, updated_at)
      select 'org_limit_' || ${appId} || '_' || g, ${appId}, ${mode}, 'bulk-' || g, 'org',
             substr(md5(${appId} || g), 1, 12), 'Bulk', 'anyone', true, 'active', now(), now()
      from generate_series(1, ${ORG_LIMITS.orgsPerApp - 1}) g`);
    await app.org('last-one');
    const over = await app.call('POST', '/v1/orgs', { externalId: 'one-too-many', name: 'No' });
    expect(over.statusCode).toBe(409);
    expect(over.json().error.code).toBe('LIMIT_REACHED');
    // Updating one that exists is no new org.
    expect((await app.call('POST', '/v1/orgs', { externalId: 'last-one', name: 'Renamed' })).statusCode).toBe(
      200,
    );
    await app.call('DELETE', '/v1/orgs/bulk-1');
    await app.org('one-too-many');
  });
});

describe('members and teams', () => {
  it('creates a member, then changes only the fields given; teams replace the list', async () => {
    const app = await customer();
    await app.org('corp');
    for (const team of ['red', 'blue', 'green'])
      expect(
        (await app.call('PUT', `/v1/orgs/corp/teams/${team}`, { name: `Team ${team}` })).statusCode,
      ).toBe(201);
    const created = await app.call('PUT', '/v1/orgs/corp/members/E-1', {
      role: 'admin',
      title: 'Head of sales',
      user_id: 'user-1',
      teams: ['red', 'blue'],
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({
      ext_id: 'E-1',
      user_id: 'user-1',
      role: 'admin',
      title: 'Head of sales',
      status: 'active',
      teams: ['blue', 'red'],
    });
    expect(created.json().id).toMatch(/^mem_/);
    const updated = await app.call('PUT', '/v1/orgs/corp/members/E-1', { teams: ['green'], title: null });
    expect(updated.statusCode, updated.body).toBe(200);
    expect(updated.json()).toMatchObject({
      id: created.json().id,
      role: 'admin',
      title: null,
      user_id: 'user-1',
      teams: ['green'],
    });
    const defaults = await app.call('PUT', '/v1/orgs/corp/members/E-2', {});
    expect(defaults.json()).toMatchObject({ role: 'member', title: null, user_id: null, teams: [] });
    expect((await app.call('GET', '/v1/orgs/corp')).json()).toMatchObject({ member_count: 2, team_count: 3 });
  });

  it('refuses unknown teams, a user linked twice and bad fields, changing nothing', async () => {
    const app = await customer();
    await app.org('corp');
    await app.call('PUT', '/v1/orgs/corp/teams/red', { name: 'Red' });
    const unknown = await app.call('PUT', '/v1/orgs/corp/members/ana', { teams: ['red', 'nope'] });
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json().error.fields).toEqual([expect.objectContaining({ in: 'body', field: 'teams.1' })]);
    expect((await app.call('GET', '/v1/orgs/corp/members')).json().items).toEqual([]);
    await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-ana' });
    const twice = await app.call('PUT', '/v1/orgs/corp/members/ana-2', { user_id: 'u-ana' });
    expect(twice.statusCode).toBe(409);
    expect(twice.json().error.code).toBe('USER_ALREADY_MEMBER');
    // The same member may be given its own user again.
    expect((await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-ana' })).statusCode).toBe(200);
    for (const payload of [
      { role: 'owner' },
      { status: 'removed' },
      { teams: ['red', 'red'] },
      { title: '' },
    ]) {
      expect(
        (await app.call('PUT', '/v1/orgs/corp/members/ana', payload)).statusCode,
        JSON.stringify(payload),
      ).toBe(422);
    }
    const tooMany = Array.from({ length: ORG_LIMITS.teamsPerMember + 1 }, (_, i) => `t${i}`);
    expect((await app.call('PUT', '/v1/orgs/corp/members/ana', { teams: tooMany })).statusCode).toBe(422);
  });

  it('removes members and teams; a removed team leaves its members’ lists', async () => {
    const app = await customer();
    await app.org('corp');
    await app.call('PUT', '/v1/orgs/corp/teams/red', { name: 'Red' });
    await app.call('PUT', '/v1/orgs/corp/members/ana', { teams: ['red'] });
    expect((await app.call('DELETE', '/v1/orgs/corp/teams/red')).json()).toEqual({ ok: true, id: 'red' });
    expect((await app.call('DELETE', '/v1/orgs/corp/teams/red')).statusCode).toBe(404);
    expect((await app.call('GET', '/v1/orgs/corp')).json().members.items[0].teams).toEqual([]);
    expect((await app.call('DELETE', '/v1/orgs/corp/members/ana')).json()).toEqual({ ok: true, id: 'ana' });
    expect((await app.call('DELETE', '/v1/orgs/corp/members/ana')).statusCode).toBe(404);
    expect((await app.call('GET', '/v1/orgs/corp')).json()).toMatchObject({ member_count: 0, team_count: 0 });
    const renamed = await app.call('PUT', '/v1/orgs/corp/teams/blue', { name: 'Blue' });
    expect(renamed.statusCode).toBe(201);
    expect((await app.call('PUT', '/v1/orgs/corp/teams/blue', { name: 'Navy' })).json()).toMatchObject({
      id: renamed.json().id,
      name: 'Navy',
    });
  });

  it('pages members and teams newest first', async () => {
    const app = await customer();
    await app.org('corp');
    for (const name of ['m1', 'm2', 'm3']) {
      await app.call('PUT', `/v1/orgs/corp/members/${name}`, {});
      await app.call('PUT', `/v1/orgs/corp/teams/${name}`, { name });
      ctx.clock.advance(1_000);
    }
    for (const list of ['members', 'teams']) {
      const first = (await app.call('GET', `/v1/orgs/corp/${list}?limit=2`)).json();
      expect(first.items.map((m: { ext_id: string }) => m.ext_id)).toEqual(['m3', 'm2']);
      const second = (
        await app.call('GET', `/v1/orgs/corp/${list}?limit=2&cursor=${first.next_cursor}`)
      ).json();
      expect(second).toMatchObject({ items: [{ ext_id: 'm1' }], next_cursor: null });
    }
    // The spec's page size: at most 100 on every list.
    for (const list of ['members', 'teams']) {
      expect((await app.call('GET', `/v1/orgs/corp/${list}?limit=100`)).statusCode).toBe(200);
      expect((await app.call('GET', `/v1/orgs/corp/${list}?limit=101`)).statusCode).toBe(422);
    }
    expect((await app.call('GET', '/v1/orgs?limit=100')).statusCode).toBe(200);
    expect((await app.call('GET', '/v1/orgs?limit=101')).statusCode).toBe(422);
  });

  it(`holds ${ORG_LIMITS.membersPerOrg.toLocaleString('en')} members and ${ORG_LIMITS.teamsPerOrg.toLocaleString('en')} teams per org`, async () => {
    const app = await customer();
    const org = await app.org('big');
    await setCount(org.id, 'member_count', ORG_LIMITS.membersPerOrg - 1);
    await setCount(org.id, 'team_count', ORG_LIMITS.teamsPerOrg - 1);
    expect((await app.call('PUT', '/v1/orgs/big/members/last', {})).statusCode).toBe(201);
    expect((await app.call('PUT', '/v1/orgs/big/teams/last', { name: 'Last' })).statusCode).toBe(201);
    const members = await app.call('PUT', '/v1/orgs/big/members/over', {});
    const teams = await app.call('PUT', '/v1/orgs/big/teams/over', { name: 'Over' });
    for (const over of [members, teams]) {
      expect(over.statusCode).toBe(409);
      expect(over.json().error.code).toBe('LIMIT_REACHED');
    }
    // Updates of existing ones still go through.
    expect((await app.call('PUT', '/v1/orgs/big/members/last', { title: 'Still here' })).statusCode).toBe(
      200,
    );
  });
});

describe("a user's own membership (/v1/me)", () => {
  it('is checked again as the operation reads it: linked to another user meanwhile, it is 404', async () => {
    const app = await customer();
    await app.org('corp');
    await app.call('PUT', '/v1/orgs/corp/teams/red', { name: 'Red' });
    const ana = (
      await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-ana', teams: ['red'] })
    ).json();
    const userToken = (await app.call('POST', '/v1/users/u-ana/tokens', {})).json().token;
    const callToken = () =>
      callWithKey(ctx.app, userToken, 'POST', `/v1/me/org-memberships/${ana.id}/call-token`, { team: 'red' });
    expect((await callToken()).statusCode).toBe(200);

    // The app's server gives the member to another user between the lookup and the call's own read.
    afterMembershipRead = async () => {
      const relinked = await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-bo' });
      expect(relinked.statusCode, relinked.body).toBe(200);
    };
    const raced = await callToken();
    expect(afterMembershipRead).toBeNull();
    expect(raced.statusCode, raced.body).toBe(404);
    expect(raced.json().error).toMatchObject({ type: 'not_found', message: 'Membership not found' });
  });

  it('has its settings changed only while it is the user’s', async () => {
    const app = await customer();
    await app.org('corp');
    const ana = (await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-ana' })).json();
    const userToken = (await app.call('POST', '/v1/users/u-ana/tokens', {})).json().token;
    afterMembershipRead = async () => {
      await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-bo' });
    };
    const raced = await callWithKey(ctx.app, userToken, 'PATCH', `/v1/me/org-memberships/${ana.id}`, {
      muted: true,
    });
    expect(afterMembershipRead).toBeNull();
    expect(raced.statusCode, raced.body).toBe(404);
    // Now the other user's membership: not muted by the first.
    const boToken = (await app.call('POST', '/v1/users/u-bo/tokens', {})).json().token;
    const [mine] = (await callWithKey(ctx.app, boToken, 'GET', '/v1/me/org-memberships')).json().items;
    expect(mine).toMatchObject({ id: ana.id, muted: false });
  });

  it("has none of the earlier user's settings once linked to another user", async () => {
    const app = await customer();
    await app.org('corp');
    const ana = (await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-ana' })).json();
    const anaToken = (await app.call('POST', '/v1/users/u-ana/tokens', {})).json().token;
    const set = await callWithKey(ctx.app, anaToken, 'PATCH', `/v1/me/org-memberships/${ana.id}`, {
      display_name: 'Ana Smith',
      muted: true,
    });
    expect(set.json()).toMatchObject({ display_name: 'Ana Smith', muted: true });
    await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-bo' });
    const boToken = (await app.call('POST', '/v1/users/u-bo/tokens', {})).json().token;
    const [mine] = (await callWithKey(ctx.app, boToken, 'GET', '/v1/me/org-memberships')).json().items;
    expect(mine).toMatchObject({ id: ana.id, display_name: null, muted: false });
    // A change that keeps the user keeps their settings.
    await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-bo', title: 'Lead' });
    await callWithKey(ctx.app, boToken, 'PATCH', `/v1/me/org-memberships/${ana.id}`, { muted: true });
    await app.call('PUT', '/v1/orgs/corp/members/ana', { user_id: 'u-bo', title: 'Chief' });
    const [again] = (await callWithKey(ctx.app, boToken, 'GET', '/v1/me/org-memberships')).json().items;
    expect(again).toMatchObject({ muted: true, title: 'Chief' });
  });
});
