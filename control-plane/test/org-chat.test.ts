import { xml } from '@xmpp/client';
import type { Element } from '@xmpp/xml';
import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { join as joinLive } from '../../e2e/support/livekit.js';
import {
  type ChatCredential,
  type ChatSession,
  connect,
  joinRoom,
  loginFailure,
} from '../../e2e/support/xmpp.js';
import { chatTestFile } from './app-users.js';
import { callWithKey, createCustomer, ejabberdAsOperator, testSettings } from './support.js';

// Org identities on the real ejabberd: the policy is enforced by mod_svc_scope (asking the test
// stack's control plane, which shares this database), team rooms by mod_muc's members-only rooms.

const file = chatTestFile();

const POLICY_TEXT = "The organisation's policy does not allow this conversation";

async function orgApp(
  policy: 'anyone' | 'teams' | 'admins' = 'anyone',
  customer: Parameters<typeof createCustomer>[1] = {},
) {
  const made = await createCustomer(file.ctx.container, customer);
  const call = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
    callWithKey(file.ctx.app, made.token, method, url, payload);
  const created = await call('POST', '/v1/orgs', { externalId: 'acme', name: 'Acme', policy });
  expect(created.statusCode, created.body).toBe(201);
  const member = async (extId: string, fields: object = {}) => {
    const put = await call('PUT', `/v1/orgs/acme/members/${extId}`, fields);
    expect(put.statusCode, put.body).toBeLessThan(300);
    return put.json();
  };
  const team = async (extId: string) => {
    const put = await call('PUT', `/v1/orgs/acme/teams/${extId}`, { name: `Team ${extId}` });
    expect(put.statusCode, put.body).toBe(201);
  };
  const token = async (extId: string): Promise<ChatCredential & { member_id: string }> => {
    const minted = await call('POST', `/v1/orgs/acme/members/${extId}/chat-token`, {});
    expect(minted.statusCode, minted.body).toBe(200);
    return minted.json();
  };
  const online = async (extId: string) => {
    const session = await connect(await token(extId));
    file.sessions.push(session);
    return session;
  };
  const personal = async (userId: string) => {
    const minted = await call('POST', '/v1/realtime/chat/tokens', { user_id: userId });
    const session = await connect(minted.json());
    file.sessions.push(session);
    return session;
  };
  return { ...made, call, member, team, token, online, personal };
}

let sent = 0;
/** Sends a chat message; resolves with what came back: the message at `to`, or the error at `from`. */
async function deliver(from: ChatSession, to: ChatSession): Promise<'delivered' | string> {
  const id = `m${++sent}`;
  const arrival = to
    .next((stanza) => stanza.is('message') && stanza.attrs.id === id, 3_000)
    .then(
      () => 'delivered',
      () => 'nothing arrived',
    );
  const refusal = from
    .next((stanza) => stanza.is('message') && stanza.attrs.id === id && stanza.attrs.type === 'error', 3_000)
    .then(
      (error: Element) => {
        const condition = error
          .getChild('error')!
          .children.find((c) => typeof c !== 'string' && c.name !== 'text');
        return `${(condition as Element).name}: ${error.getChild('error')!.getChildText('text')}`;
      },
      () => 'no error',
    );
  await from.xmpp.send(
    xml('message', { to: to.credential.jid, type: 'chat', id }, xml('body', {}, `hello ${id}`)),
  );
  return Promise.race([
    arrival.then((outcome) => (outcome === 'delivered' ? outcome : refusal)),
    refusal.then((outcome) => (outcome === 'no error' ? arrival : outcome)),
  ]);
}
const REFUSED = `forbidden: ${POLICY_TEXT}`;

/** Whether LiveKit's report of an identity's join has been recorded (an open session). */
const inCall = (identity: string) =>
  file.ctx.container.pool.exists(
    sql.unsafe`select 1 from live_sessions where identity = ${identity} and left_at is null`,
  );

describe('org identities on the chat server', () => {
  it('give a member a JID of its own, apart from the personal one', async () => {
    const app = await orgApp();
    const member = await app.member('ana', { user_id: 'ana' });
    const credential = await app.token('ana');
    expect(credential.member_id).toBe(member.id);
    // An identity key of its own, not the app's ext_id.
    expect(credential.user).toMatch(/^[a-z0-9]{10}\.\+[a-z0-9]{12}\.[a-z0-9]{10}$/);
    const personal = (await app.call('POST', '/v1/realtime/chat/tokens', { user_id: 'ana' })).json();
    expect(personal.jid).not.toBe(credential.jid);
    expect(credential.room_prefix).toBe(credential.user.slice(0, -10));
  });

  it('gives a member linked to another user, or added again, a new identity', async () => {
    const app = await orgApp();
    await app.member('ana', { user_id: 'u-1' });
    const first = await app.token('ana');
    await app.member('ana', { user_id: 'u-1', title: 'Same person' });
    expect((await app.token('ana')).jid).toBe(first.jid);
    await app.member('ana', { user_id: 'u-2' });
    expect(await loginFailure(first)).toBe('not-authorized');
    const second = await app.token('ana');
    expect(second.jid).not.toBe(first.jid);
    await app.call('DELETE', '/v1/orgs/acme/members/ana');
    await app.member('ana', { user_id: 'u-2' });
    expect([first.jid, second.jid]).not.toContain((await app.token('ana')).jid);
  });

  it('lets two members the policy allows talk, and ejabberd refuses a pair it does not', async () => {
    const app = await orgApp('teams');
    await app.team('red');
    await app.member('ana', { teams: ['red'] });
    await app.member('bo', { teams: ['red'] });
    await app.member('cy');
    const [ana, bo, cy] = [await app.online('ana'), await app.online('bo'), await app.online('cy')];
    expect(await deliver(ana, bo)).toBe('delivered');
    expect(await deliver(bo, ana)).toBe('delivered');
    // Straight from the client: the server itself refuses, whatever the app's API would say.
    expect(await deliver(cy, ana)).toBe(REFUSED);
    expect(await deliver(ana, cy)).toBe(REFUSED);
  });

  it('keeps org identities and personal ones apart both ways', async () => {
    const app = await orgApp();
    await app.member('ana', { user_id: 'ana' });
    const work = await app.online('ana');
    const home = await app.personal('bo');
    expect(await deliver(work, home)).toBe(REFUSED);
    expect(await deliver(home, work)).toBe(REFUSED);
  });

  it('applies a policy change at once, and admins reach everyone', async () => {
    const app = await orgApp('anyone');
    await app.member('ana');
    await app.member('bo');
    await app.member('boss', { role: 'admin' });
    const [ana, bo, boss] = [await app.online('ana'), await app.online('bo'), await app.online('boss')];
    expect(await deliver(ana, bo)).toBe('delivered');
    expect((await app.call('PATCH', '/v1/orgs/acme', { policy: 'admins' })).statusCode).toBe(200);
    expect(await deliver(ana, bo)).toBe(REFUSED);
    expect(await deliver(ana, boss)).toBe('delivered');
    expect(await deliver(boss, bo)).toBe('delivered');
  });

  it('lets team members into the team room, and ejabberd refuses anyone else', async () => {
    const app = await orgApp();
    await app.team('red');
    await app.member('ana', { teams: ['red'] });
    await app.member('cy');
    const [ana, cy] = [await app.online('ana'), await app.online('cy')];
    const room = `${ana.credential.room_prefix}red@${ana.credential.muc}`;
    const joined = await joinRoom(ana, room);
    expect(joined.attrs.type).toBeUndefined();
    const refused = await joinRoom(cy, room);
    expect(refused.attrs.type).toBe('error');
    expect(refused.getChild('error')?.getChild('registration-required')).toBeDefined();
    // A personal identity of the same app cannot enter either.
    const outsider = await app.personal('dee');
    expect((await joinRoom(outsider, room)).attrs.type).toBe('error');
  });

  it('brings team rooms to the app’s new room size, members-only still', async () => {
    const app = await orgApp();
    await app.team('red');
    const credential = await app.token((await app.member('ana', { teams: ['red'] })).ext_id);
    const room = `${credential.room_prefix}red`;
    expect((await app.call('PATCH', '/v1/realtime/app', { max_room_size: 7 })).statusCode).toBe(200);
    const options = await ejabberdAsOperator(testSettings(), 'get_room_options', {
      name: room,
      service: credential.muc,
    });
    const byName = (await options.json()) as Record<string, string>;
    expect(byName).toMatchObject({ max_users: '7', members_only: 'true', moderated: 'false' });
  });

  it('makes a team room ejabberd lost again members-only, as the team made it', async () => {
    const app = await orgApp();
    await app.team('red');
    const credential = await app.token((await app.member('ana', { teams: ['red'] })).ext_id);
    const [name, service] = [`${credential.room_prefix}red`, credential.muc];
    const options = async () =>
      (await (
        await ejabberdAsOperator(testSettings(), 'get_room_options', { name, service })
      ).json()) as Record<string, string>;
    // Lost as a restore of older ejabberd data loses it (destroy_room answers before the room is gone).
    expect((await ejabberdAsOperator(testSettings(), 'destroy_room', { name, service })).status).toBe(200);
    await expect.poll(options).toEqual({});
    expect((await app.call('PATCH', '/v1/realtime/app', { max_room_size: 9 })).statusCode).toBe(200);
    expect(await options()).toMatchObject({ max_users: '9', members_only: 'true' });
  });

  it('puts back a team membership ejabberd lost at the member’s next change', async () => {
    const app = await orgApp();
    await app.team('red');
    await app.member('ana', { teams: ['red'] });
    const ana = await app.online('ana');
    const [name, service] = [`${ana.credential.room_prefix}red`, ana.credential.muc];
    // Undone on ejabberd alone, as a change that failed part way there leaves it.
    const unset = await ejabberdAsOperator(testSettings(), 'set_room_affiliation', {
      name,
      service,
      jid: ana.credential.jid.split('/')[0],
      affiliation: 'none',
    });
    expect(unset.status).toBe(200);
    expect((await joinRoom(ana, `${name}@${service}`)).attrs.type).toBe('error');
    // A change of anything else of theirs states their teams again.
    await app.member('ana', { title: 'Lead' });
    expect((await joinRoom(ana, `${name}@${service}`)).attrs.type).toBeUndefined();
  });

  it('removing a member takes them out of the room at once and refuses their next login', async () => {
    const app = await orgApp();
    await app.team('red');
    await app.member('ana', { teams: ['red'] });
    const credential = await app.token('ana');
    const ana = await connect(credential);
    file.sessions.push(ana);
    const room = `${ana.credential.room_prefix}red@${ana.credential.muc}`;
    await joinRoom(ana, room);
    const kicked = ana.next((stanza) => stanza.is('presence') && stanza.attrs.type === 'unavailable', 5_000);
    expect((await app.call('DELETE', '/v1/orgs/acme/members/ana')).statusCode).toBe(200);
    await kicked;
    expect(await loginFailure(credential)).toBe('not-authorized');
  });

  it('taking a member off a team takes them out of its room', async () => {
    const app = await orgApp();
    await app.team('red');
    await app.member('ana', { teams: ['red'] });
    const ana = await app.online('ana');
    const room = `${ana.credential.room_prefix}red@${ana.credential.muc}`;
    await joinRoom(ana, room);
    const kicked = ana.next(
      (stanza) =>
        stanza.is('presence') && stanza.attrs.type === 'unavailable' && stanza.attrs.from?.startsWith(room),
      5_000,
    );
    await app.member('ana', { teams: [] });
    await kicked;
    // The room's other notices of the kick may still be queued: wait for the join's own answer.
    const nick = `${room}/${ana.credential.nickname}`;
    const refused = ana.next(
      (stanza) => stanza.is('presence') && stanza.attrs.from === nick && stanza.attrs.type === 'error',
    );
    void joinRoom(ana, room);
    expect((await refused).getChild('error')?.getChild('registration-required')).toBeDefined();
  });

  it('charges a team change in full once the room has it, though the balance does not cover it', async () => {
    // Three writes (the org, the team, the member) at 500 µ$ each leave 100 µ$: above zero, so the
    // next write is admitted, and short of its price.
    const app = await orgApp('anyone', { mode: 'live', balanceMicros: 3 * 500 + 100 });
    await app.team('red');
    await app.member('ana');
    const ana = await app.online('ana');
    const put = await app.call('PUT', '/v1/orgs/acme/members/ana', { teams: ['red'] });
    // ejabberd has let ana into the room before the commit: the change stands, and is paid for
    // (refused with 402, it would be undone here and not there).
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().teams).toEqual(['red']);
    const room = `${ana.credential.room_prefix}red@${ana.credential.muc}`;
    expect((await joinRoom(ana, room)).attrs.type).toBeUndefined();
    expect((await file.ctx.container.billing.getBalance(app.account.id)).balance_micros).toBe(-400);
  });

  it('deleting a team takes every member out of its room, and none gets back in', async () => {
    const app = await orgApp();
    await app.team('red');
    const people = ['ana', 'bo', 'cy'];
    for (const extId of people) await app.member(extId, { teams: ['red'] });
    const clients = await Promise.all(people.map((extId) => app.online(extId)));
    const room = `${clients[0]!.credential.room_prefix}red@${clients[0]!.credential.muc}`;
    for (const client of clients) await joinRoom(client, room);
    const kicked = clients.map((client) =>
      client.next(
        (stanza) =>
          stanza.is('presence') &&
          stanza.attrs.type === 'unavailable' &&
          stanza.attrs.from === `${room}/${client.credential.nickname}`,
        5_000,
      ),
    );
    expect((await app.call('DELETE', '/v1/orgs/acme/teams/red')).statusCode).toBe(200);
    await Promise.all(kicked);
    for (const client of clients) {
      const refused = client.next(
        (stanza) =>
          stanza.is('presence') &&
          stanza.attrs.from === `${room}/${client.credential.nickname}` &&
          stanza.attrs.type === 'error',
      );
      void joinRoom(client, room);
      expect((await refused).getChild('error')?.getChild('registration-required')).toBeDefined();
    }
  });

  it('suspending the org closes every open session and refuses logins until restored', async () => {
    const app = await orgApp();
    await app.member('ana');
    await app.member('bo');
    const credential = await app.token('ana');
    const ana = await connect(credential);
    file.sessions.push(ana);
    const closed = new Promise<void>((resolve) => ana.xmpp.once('disconnect', () => resolve()));
    const suspended = await app.call('PATCH', '/v1/orgs/acme', { status: 'suspended' });
    expect(suspended.statusCode, suspended.body).toBe(200);
    await closed;
    expect(await loginFailure(credential)).toBe('not-authorized');
    const refused = await app.call('POST', '/v1/orgs/acme/members/bo/chat-token', {});
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe('ORG_SUSPENDED');
    await app.call('PATCH', '/v1/orgs/acme', { status: 'active' });
    const again = await app.online('ana');
    expect(again.xmpp.status).toBe('online');
  });

  it('turning chat off through POST /v1/orgs closes file.sessions as PATCH does', async () => {
    const app = await orgApp();
    await app.member('ana');
    const credential = await app.token('ana');
    const ana = await connect(credential);
    file.sessions.push(ana);
    const closed = new Promise<void>((resolve) => ana.xmpp.once('disconnect', () => resolve()));
    const updated = await app.call('POST', '/v1/orgs', { externalId: 'acme', name: 'Acme', chat: false });
    expect(updated.statusCode, updated.body).toBe(200);
    await closed;
    expect(await loginFailure(credential)).toBe('not-authorized');
  });

  it('turning chat off and disabling a member refuse tokens with their own codes', async () => {
    const app = await orgApp();
    await app.member('ana', { status: 'disabled' });
    const disabled = await app.call('POST', '/v1/orgs/acme/members/ana/chat-token', {});
    expect(disabled.statusCode).toBe(403);
    expect(disabled.json().error.code).toBe('MEMBER_DISABLED');
    await app.call('PATCH', '/v1/orgs/acme', { chat: false });
    const off = await app.call('POST', '/v1/orgs/acme/members/ana/chat-token', {});
    expect(off.json().error.code).toBe('ORG_CHAT_OFF');
    expect((await app.call('POST', '/v1/orgs/acme/members/nobody/chat-token', {})).statusCode).toBe(404);
  });

  it('deleting the org locks every member and keeps the archive', async () => {
    const app = await orgApp();
    expect((await app.call('PATCH', '/v1/realtime/app', { mam: true })).statusCode).toBe(200);
    await app.member('ana');
    await app.member('bo');
    const credential = await app.token('ana');
    const ana = await connect(credential);
    file.sessions.push(ana);
    const bo = await app.online('bo');
    expect(await deliver(ana, bo)).toBe('delivered');
    const archived = async () => {
      const answer = await ejabberdAsOperator(testSettings(), 'svc_archive_size', {
        user: credential.user,
        host: credential.domain,
      });
      return ((await answer.json()) as { messages: number }).messages;
    };
    // The sender's archive holds the message (written as it is routed).
    for (let i = 0; i < 20 && (await archived()) === 0; i += 1) await new Promise((r) => setTimeout(r, 100));
    const before = await archived();
    expect(before).toBeGreaterThan(0);
    await app.call('DELETE', '/v1/orgs/acme');
    expect(await loginFailure(credential)).toBe('not-authorized');
    expect(await archived()).toBe(before);
    const refused = await app.call('POST', '/v1/orgs/acme/members/ana/chat-token', {});
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error.code).toBe('ORG_DELETED');
  });
});

describe('the directory, conversations and calls', () => {
  /** ana and bo share team red; gus is a guest in red; cy has no team; boss is an admin. */
  async function teamsOrg() {
    const app = await orgApp('teams');
    await app.team('red');
    await app.member('ana', { teams: ['red'], user_id: 'u-ana' });
    await app.member('bo', { teams: ['red'] });
    await app.member('gus', { teams: ['red'], role: 'guest' });
    await app.member('cy');
    await app.member('boss', { role: 'admin' });
    return app;
  }
  const names = (page: { items: { ext_id: string }[] }) => page.items.map((item) => item.ext_id).sort();

  it('lists whom each member may reach, and leaves out whom the policy forbids', async () => {
    const app = await teamsOrg();
    const directory = async (extId: string) =>
      (await app.call('GET', `/v1/orgs/acme/members/${extId}/directory`)).json();
    expect(names(await directory('ana'))).toEqual(['bo', 'boss', 'gus']);
    expect(names(await directory('cy'))).toEqual(['boss']);
    expect(names(await directory('gus'))).toEqual(['ana', 'bo', 'boss']);
    expect(names(await directory('boss'))).toEqual(['ana', 'bo', 'cy', 'gus']);
    const first = (await directory('ana')).items[0];
    expect(first.jid).toMatch(/^[a-z0-9]{10}\.\+[a-z0-9]{12}\.[a-z0-9]{10}@chat\.local$/);
    // Members see each other's work identity, never the app user behind it.
    expect(first).not.toHaveProperty('user_id');
    // Paged like every list.
    const page = (await app.call('GET', '/v1/orgs/acme/members/boss/directory?limit=3')).json();
    expect(page.items).toHaveLength(3);
    const rest = (
      await app.call('GET', `/v1/orgs/acme/members/boss/directory?cursor=${page.next_cursor}`)
    ).json();
    expect([...names(page), ...names(rest)].sort()).toEqual(['ana', 'bo', 'cy', 'gus']);
    // A disabled member is nobody's contact, and reaches nobody.
    await app.member('bo', { status: 'disabled' });
    expect(names(await directory('ana'))).toEqual(['boss', 'gus']);
    expect((await directory('bo')).items).toEqual([]);
  });

  it('opens a 1:1 only if the policy allows it', async () => {
    const app = await teamsOrg();
    const opened = await app.call('POST', '/v1/orgs/acme/conversations', { member: 'ana', with: 'bo' });
    expect(opened.statusCode, opened.body).toBe(200);
    expect(opened.json().with.jid).toBe((await app.token('bo')).jid);
    const refused = await app.call('POST', '/v1/orgs/acme/conversations', { member: 'ana', with: 'cy' });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatchObject({ type: 'permission_error', code: 'ORG_POLICY' });
    expect(
      (await app.call('POST', '/v1/orgs/acme/conversations', { member: 'ana', with: 'ana' })).json().error
        .code,
    ).toBe('ORG_POLICY');
    expect(
      (await app.call('POST', '/v1/orgs/acme/conversations', { member: 'ana', with: 'nobody' })).statusCode,
    ).toBe(404);
  });

  it('gives call tokens for a team room of the member and an allowed 1:1 only', async () => {
    const app = await teamsOrg();
    const team = await app.call('POST', '/v1/orgs/acme/members/ana/call-token', { team: 'red' });
    expect(team.statusCode, team.body).toBe(200);
    expect(team.json().room).toMatch(/^[a-z0-9]{10}\.\+[a-z0-9]{12}\.t\+red$/);
    // The app's own live rooms cannot take an org call's name.
    const lookalike = await app.call('POST', '/v1/realtime/live/tokens', {
      room: team.json().room.slice(11),
      identity: 'ana',
      kind: 'call',
    });
    expect(lookalike.statusCode).toBe(422);
    expect(team.json().identity).toMatch(/^\+[a-z0-9]{12}\.[a-z0-9]{10}$/);
    const pair = (await app.call('POST', '/v1/orgs/acme/members/bo/call-token', { with: 'ana' })).json();
    expect(pair.room).toBe(
      (await app.call('POST', '/v1/orgs/acme/members/ana/call-token', { with: 'bo' })).json().room,
    );
    const notInTeam = await app.call('POST', '/v1/orgs/acme/members/cy/call-token', { team: 'red' });
    expect(notInTeam.json().error.code).toBe('NOT_IN_TEAM');
    expect(
      (await app.call('POST', '/v1/orgs/acme/members/ana/call-token', { with: 'cy' })).json().error.code,
    ).toBe('ORG_POLICY');
    for (const body of [{}, { team: 'red', with: 'bo' }])
      expect((await app.call('POST', '/v1/orgs/acme/members/ana/call-token', body)).statusCode).toBe(422);
  });

  it('ends a removed member’s call, and sends them away if they join again with their token', async () => {
    const app = await teamsOrg();
    const call = (await app.call('POST', '/v1/orgs/acme/members/bo/call-token', { team: 'red' })).json();
    const bo = await joinLive(call.url, call.token);
    try {
      // LiveKit's report of the join reaches the stack's control plane on its own time.
      for (let i = 0; i < 100 && !(await inCall(call.identity)); i += 1)
        await new Promise((resolve) => setTimeout(resolve, 100));
      const ended = bo.waitForDisconnect(15_000);
      expect((await app.call('DELETE', '/v1/orgs/acme/members/bo')).statusCode).toBe(200);
      await ended;
      // Told why first by an attribute of its own, and by a data message when it arrives in time.
      const told = bo.notices.some(
        (notice) =>
          (notice.type === 'attributes' && notice.changed['svc.notice']?.includes('org_access_ended')) ||
          (notice.type === 'data' && notice.payload.includes('org_access_ended')),
      );
      expect(told, JSON.stringify(bo.notices)).toBe(true);
    } finally {
      await bo.leave();
    }
    // The token is still within its time; LiveKit lets it in, and the bundle sends it away.
    const again = await joinLive(call.url, call.token);
    try {
      await again.waitForDisconnect(15_000);
    } finally {
      await again.leave();
    }
  });

  it('gives the signed-in user their own identities and nobody else’s', async () => {
    const app = await teamsOrg();
    const minted = await app.call('POST', '/v1/users/u-ana/tokens', {});
    const userToken = minted.json().token;
    const asUser = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
      callWithKey(file.ctx.app, userToken, method, url, payload);
    const memberships = (await asUser('GET', '/v1/me/org-memberships')).json();
    expect(memberships.items).toHaveLength(1);
    const [mine] = memberships.items;
    expect(mine).toMatchObject({ ext_id: 'ana', role: 'member', teams: ['red'], muted: false });
    expect(mine.org).toEqual({
      external_id: 'acme',
      kind: 'org',
      name: 'Acme',
      logo_url: null,
      status: 'active',
      chat: true,
    });
    const changed = await asUser('PATCH', `/v1/me/org-memberships/${mine.id}`, {
      display_name: 'Ana L.',
      muted: true,
    });
    expect(changed.json()).toMatchObject({ display_name: 'Ana L.', muted: true });
    const credential = await asUser('POST', `/v1/me/org-memberships/${mine.id}/chat-token`, {});
    expect(credential.statusCode, credential.body).toBe(200);
    expect(credential.json()).toMatchObject({ jid: mine.jid, nickname: 'Ana L.', member_id: mine.id });
    const session = await connect(credential.json());
    file.sessions.push(session);
    expect(names((await asUser('GET', `/v1/me/org-memberships/${mine.id}/directory`)).json())).toEqual([
      'bo',
      'boss',
      'gus',
    ]);
    expect(
      (await asUser('POST', `/v1/me/org-memberships/${mine.id}/conversations`, { with: 'cy' })).statusCode,
    ).toBe(403);
    expect(
      (await asUser('POST', `/v1/me/org-memberships/${mine.id}/call-token`, { team: 'red' })).statusCode,
    ).toBe(200);
    // Another member's id is not the user's: 404 on every route.
    const bo = (await app.call('GET', '/v1/orgs/acme/members'))
      .json()
      .items.find((m: { ext_id: string }) => m.ext_id === 'bo');
    for (const [method, url, payload] of [
      ['POST', `/v1/me/org-memberships/${bo.id}/chat-token`, {}],
      ['GET', `/v1/me/org-memberships/${bo.id}/directory`, undefined],
      ['PATCH', `/v1/me/org-memberships/${bo.id}`, { muted: true }],
    ] as const)
      expect((await asUser(method, url, payload)).statusCode, `${method} ${url}`).toBe(404);
    // A deleted org's identities are no longer the user's.
    await app.call('DELETE', '/v1/orgs/acme');
    expect((await asUser('GET', '/v1/me/org-memberships')).json().items).toEqual([]);
  });
});

describe('usage per org', () => {
  it('attributes org identities’ active users and call minutes to their org, adding up to the account’s', async () => {
    const app = await orgApp();
    await app.call('POST', '/v1/orgs', { externalId: 'beta', name: 'Beta' });
    await app.team('red');
    await app.member('ana', { teams: ['red'] });
    await app.member('bo', { teams: ['red'] });
    await app.call('PUT', '/v1/orgs/beta/members/cy', {});
    // Logins through ejabberd: two identities of acme (one logs in twice), one of beta, one personal.
    await app.online('ana');
    await app.online('ana');
    await app.online('bo');
    const beta = (await app.call('POST', '/v1/orgs/beta/members/cy/chat-token', {})).json();
    file.sessions.push(await connect(beta));
    await app.personal('dee');
    // A call in the team room, through the real LiveKit: its minutes are metered when the member leaves.
    const call = (await app.call('POST', '/v1/orgs/acme/members/ana/call-token', { team: 'red' })).json();
    const participant = await joinLive(call.url, call.token);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await participant.leave();
    await file.ctx.container.accrual.flush();

    const today = new Date().toISOString().slice(0, 10);
    const lines = async (org: string) =>
      (await app.call('GET', `/v1/orgs/${org}/usage?frm=${today}&to=${today}`)).json();
    const quantityOf = (
      report: { usage: { product: string; metric: string; quantity: number }[] },
      metric: string,
    ) => report.usage.filter((line) => line.metric === metric).reduce((sum, line) => sum + line.quantity, 0);
    let acme = await lines('acme');
    for (
      let i = 0;
      i < 50 && !acme.usage.some((line: { product: string }) => line.product !== 'chat');
      i += 1
    ) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      acme = await lines('acme');
    }
    expect(quantityOf(acme, 'monthly_active_users')).toBe(2);
    const minutes = acme.usage.find((line: { product: string }) => line.product !== 'chat');
    expect(minutes, JSON.stringify(acme.usage)).toBeDefined();
    expect(minutes.list_price_micros).toBeGreaterThanOrEqual(minutes.cost_micros);
    expect(quantityOf(await lines('beta'), 'monthly_active_users')).toBe(1);

    // Every org's report, and the account's: the orgs' lines are part of the account's, no more.
    const all = (await app.call('GET', `/v1/orgs/usage?frm=${today}&to=${today}`)).json();
    expect(all.items.map((item: { org: string }) => item.org).sort()).toEqual(['acme', 'beta']);
    const account = await file.ctx.container.billing.usageReport(app.account.id, 'test', 1);
    const orgCost = all.items.reduce(
      (sum: number, item: { total: { cost_micros: number } }) => sum + item.total.cost_micros,
      0,
    );
    const personalMau = 1;
    expect(quantityOf(account, 'monthly_active_users')).toBe(
      all.items.reduce(
        (sum: number, item: Parameters<typeof quantityOf>[0]) =>
          sum + quantityOf(item, 'monthly_active_users'),
        0,
      ) + personalMau,
    );
    expect(orgCost).toBeLessThanOrEqual(account.total.cost_micros);
    expect((await app.call('GET', `/v1/orgs/acme/usage?frm=${today}&to=2020-01-01`)).statusCode).toBe(422);
  });
});
