import { xml } from '@xmpp/client';
import { describe, expect, it } from 'vitest';
import { join as joinLive } from '../../e2e/support/livekit.js';
import {
  arrives,
  bookmarks,
  bounce,
  closed,
  enter,
  innerMessage,
  loginFailure,
  mucsubMessage,
  post,
  statuses,
} from '../../e2e/support/xmpp.js';
import { type AppUser, appWithUsers, chatTestFile } from './app-users.js';
import { ejabberdAsOperator, testSettings } from './support.js';

// A business's public chat on the real ejabberd: a room per customer (svc_conversations), its staff
// subscribed (MUC/Sub), who may post decided by mod_svc_scope asking the test stack's control plane
// (which shares this database), who is in decided by the rooms' affiliations.

const file = chatTestFile();

const world = () => appWithUsers(file.ctx, file.sessions);

/** A business with its owner, and a staff member on its team. */
async function shop(fields: object = {}) {
  const app = await world();
  const [owner, staff] = [await app.user('owner'), await app.user('staff')];
  const created = await owner.call('POST', '/v1/me/businesses', { name: 'Acme', ...fields });
  expect(created.statusCode, created.body).toBe(201);
  const business = created.json() as { id: string; code: string; inbox: { id: string } };
  const invited = await owner.call('POST', `/v1/me/businesses/${business.id}/members`, {
    code: await staff.code(),
    title: 'Sam',
  });
  expect((await staff.call('POST', `/v1/me/org-invites/${invited.json().id}/accept`)).statusCode).toBe(200);
  const base = `/v1/me/businesses/${business.id}`;
  /** A customer's conversation room, opened by code. */
  const opens = async (customer: AppUser) => {
    const chat = await customer.call('POST', `/v1/me/codes/${business.code}/chat`, { name: 'Cleo' });
    expect(chat.statusCode, chat.body).toBe(200);
    return chat.json().jid as string;
  };
  return { app, owner, staff, business, base, staffId: invited.json().id as string, opens };
}

describe('a business’s public chat on the chat server', () => {
  it('brings a customer who has the code to the staff, and the staff’s reply back as the business', async () => {
    const { app, owner, staff, opens } = await shop();
    const customer = await app.user('cleo');
    const room = await opens(customer);
    const [cleo, sam, boss] = [await customer.personal(), await staff.atWork(), await owner.atWork()];
    const heard = sam.next(mucsubMessage(room, 'Is it open on Sunday?'));
    const alsoHeard = boss.next(mucsubMessage(room, 'Is it open on Sunday?'));
    await post(cleo, room, 'Is it open on Sunday?');
    expect(innerMessage(await heard).attrs.from).toBe(`${room}/Cleo`);
    await alsoHeard;
    const answer = cleo.next(mucsubMessage(room, 'Yes, ten to four'));
    await post(sam, room, 'Yes, ten to four');
    const reply = await answer;
    // The business's name, numbered, and nothing of the staff member's identity.
    expect(innerMessage(reply).attrs.from).toBe(`${room}/Acme (2)`);
    expect(reply.toString()).not.toContain(sam.credential.user);
    expect(reply.toString()).not.toContain('Sam');
  });

  it('shows the staff’s titles when the business says so, and keeps each to the name it gives', async () => {
    const { app, staff, opens, base, owner } = await shop({ staff_names: 'shown' });
    const room = await opens(await app.user('cleo'));
    const sam = await staff.atWork();
    expect((await enter(sam, room, 'Acme (2)')).attrs.type).toBe('error');
    const entered = await enter(sam, room, 'Sam (2)');
    expect(entered.attrs.type).toBeUndefined();
    const sentOut = sam.next(
      (stanza) =>
        stanza.is('presence') &&
        stanza.attrs.from === `${room}/Sam (2)` &&
        stanza.attrs.type === 'unavailable',
    );
    await owner.call('PATCH', base, { staff_names: 'hidden' });
    // In the room under the old name: sent out, to come back under the new one.
    expect(statuses(await sentOut)).toContain('307');
    expect((await enter(sam, room, 'Acme (2)')).attrs.type).toBeUndefined();
    const other = await staff.atWork();
    expect((await enter(other, room, 'Sam (2)')).attrs.type).toBe('error');
  });

  it('refuses a post from staff who may only read, in the server itself', async () => {
    const { app, owner, staff, opens, base, business, staffId } = await shop();
    const room = await opens(await app.user('cleo'));
    const put = await owner.call('PUT', `${base}/inboxes/${business.inbox.id}/staff`, {
      staff: [
        {
          member_id: (await owner.call('GET', `${base}/members?status=active`))
            .json()
            .items.find((p: { role: string }) => p.role === 'owner').id,
          may_reply: true,
        },
        { member_id: staffId, may_reply: false },
      ],
    });
    expect(put.statusCode, put.body).toBe(200);
    const sam = await staff.atWork();
    expect(await bounce(sam, await post(sam, room, 'Let me check'))).toBe('forbidden');
    // Reading still works.
    const cleo = await (await app.user('cleo')).personal();
    const heard = sam.next(mucsubMessage(room, 'Thanks'));
    await post(cleo, room, 'Thanks');
    await heard;
  });

  it('stops a staff member taken off the inbox receiving its conversations at once', async () => {
    const { app, owner, staff, opens, base, business } = await shop();
    const customer = await app.user('cleo');
    const room = await opens(customer);
    const [cleo, sam, boss] = [await customer.personal(), await staff.atWork(), await owner.atWork()];
    expect((await enter(sam, room, 'Acme (2)')).attrs.type).toBeUndefined();
    const ownerId = (await owner.call('GET', `${base}/members?status=active`))
      .json()
      .items.find((p: { role: string }) => p.role === 'owner').id;
    const put = await owner.call('PUT', `${base}/inboxes/${business.inbox.id}/staff`, {
      staff: [{ member_id: ownerId, may_reply: true }],
    });
    expect(put.json().staff).toEqual([{ member_id: ownerId, may_reply: true, nick: 'Acme (1)' }]);
    // Sent out of the room as the change is made.
    const sentOut = await sam.next(
      (stanza) =>
        stanza.is('presence') &&
        stanza.attrs.from === `${room}/Acme (2)` &&
        stanza.attrs.type === 'unavailable',
    );
    expect(statuses(sentOut)).toContain('321');
    const heardByBoss = boss.next(mucsubMessage(room, 'Hello again'));
    await post(cleo, room, 'Hello again');
    await heardByBoss;
    expect(await arrives(sam, room, 'Hello again')).toBe(false);
    // Refused by mod_svc_scope first (no name of theirs here now); the room no longer lists them either.
    const refused = await enter(sam, room, 'Acme (2)');
    expect(refused.getChild('error')?.getChild('forbidden')).toBeDefined();
    // New conversations do not include them either.
    const later = await opens(await app.user('dee'));
    expect((await enter(sam, later, 'Acme (2)')).attrs.type).toBe('error');
  });

  it('renames every conversation room with the public chat', async () => {
    const { app, owner, opens, base, business } = await shop();
    const rooms = [await opens(await app.user('cleo')), await opens(await app.user('dee'))];
    const renamed = await owner.call('PATCH', `${base}/inboxes/${business.inbox.id}`, {
      name: 'Acme help desk',
      line: 'We answer within the hour',
    });
    expect(renamed.json()).toEqual({
      id: business.inbox.id,
      name: 'Acme help desk',
      line: 'We answer within the hour',
    });
    for (const room of rooms) {
      const [name, service] = room.split('@');
      const options = await ejabberdAsOperator(testSettings(), 'get_room_options', { name, service });
      expect(await options.json()).toMatchObject({
        title: 'Acme help desk',
        description: 'We answer within the hour',
        members_only: 'true',
      });
    }
  });

  it('puts the rooms right with the next staff change when an earlier one was undone', async () => {
    const { app, owner, staff, opens, base, business, staffId } = await shop();
    const cleo = await app.user('cleo');
    const room = await opens(cleo);
    const sam = await staff.atWork();
    // As if a change had reached ejabberd and then been rolled back: an identity of the business that
    // is not on the staff, a member and subscriber of the room.
    const stray = `${sam.credential.room_prefix}zzzzzzzzzz@${sam.credential.domain}`;
    const [name] = room.split('@');
    await file.ctx.container.ejabberd.setConversationStaff(
      sam.credential.room_prefix,
      [name!],
      [{ jid: stray, nick: 'Stray (9)' }],
    );
    const subscribers = async () =>
      (await (
        await ejabberdAsOperator(testSettings(), 'get_subscribers', { name, service: room.split('@')[1] })
      ).json()) as string[];
    expect(await subscribers()).toContain(stray);
    // The customer reopening the chat brings the room to its people...
    expect((await cleo.call('POST', `/v1/me/codes/${business.code}/chat`, { name: 'Cleo' })).statusCode).toBe(
      200,
    );
    expect(await subscribers()).not.toContain(stray);
    // ...and so does the next staff change.
    await file.ctx.container.ejabberd.setConversationStaff(
      sam.credential.room_prefix,
      [name!],
      [{ jid: stray, nick: 'Stray (9)' }],
    );
    expect(await subscribers()).toContain(stray);
    const ownerId = (await owner.call('GET', `${base}/members?status=active`))
      .json()
      .items.find((p: { role: string }) => p.role === 'owner').id;
    await owner.call('PUT', `${base}/inboxes/${business.inbox.id}/staff`, {
      staff: [
        { member_id: ownerId, may_reply: true },
        { member_id: staffId, may_reply: true },
      ],
    });
    expect(await subscribers()).not.toContain(stray);
    expect(await subscribers()).toContain(sam.credential.jid.split('/')[0]);
  });

  it('keeps customers to their own conversation, and the business’s chat off stops their posts', async () => {
    const { app, owner, opens, base } = await shop();
    const [cleoUser, deeUser] = [await app.user('cleo'), await app.user('dee')];
    const [cleosRoom, deesRoom] = [await opens(cleoUser), await opens(deeUser)];
    const [cleo, dee] = [await cleoUser.personal(), await deeUser.personal()];
    expect(await bounce(dee, await post(dee, cleosRoom, 'Not mine'))).toBe('forbidden');
    expect((await enter(dee, cleosRoom, 'Dee')).attrs.type).toBe('error');
    expect(await bounce(dee, await post(dee, deesRoom, 'Mine'))).toBeNull();
    // A customer enters under the name they opened the chat with, never a staff member's.
    expect((await enter(dee, deesRoom, 'Acme (3)')).getChild('error')?.getChild('forbidden')).toBeDefined();
    expect((await enter(dee, deesRoom, 'Cleo')).attrs.type).toBeUndefined();
    await owner.call('PATCH', base, { chat: false });
    expect(await bounce(cleo, await post(cleo, cleosRoom, 'Anyone there?'))).toBe('forbidden');
  });
});

describe('a business’s team on the chat server', () => {
  it('puts the inbox in an accepted member’s bookmarks, and lets them in', async () => {
    const { app, staff, business, owner } = await shop();
    const sam = await staff.atWork();
    const rooms = await bookmarks(sam);
    const inbox = (await owner.call('GET', `/v1/me/businesses/${business.id}/inboxes`)).json().items[0];
    expect(rooms).toEqual([inbox.jid]);
    expect((await enter(sam, inbox.jid, 'Sam')).attrs.type).toBeUndefined();
    // It follows the app's room size, members-only still.
    expect((await app.asApp('PATCH', '/v1/realtime/app', { max_room_size: 7 })).statusCode).toBe(200);
    const [name, service] = inbox.jid.split('@');
    const options = await ejabberdAsOperator(testSettings(), 'get_room_options', { name, service });
    expect(await options.json()).toMatchObject({ max_users: '7', members_only: 'true' });
  });

  it('refuses a disabled member at login, and lets them back when restored', async () => {
    const { owner, staff, base, staffId } = await shop();
    const credential = await staff.workCredential();
    expect(await loginFailure(credential)).toBeNull();
    expect((await owner.call('PATCH', `${base}/members/${staffId}`, { status: 'disabled' })).statusCode).toBe(
      200,
    );
    expect(await loginFailure(credential)).toBe('not-authorized');
    const [membership] = (await staff.call('GET', '/v1/me/org-memberships')).json().items;
    const refused = await staff.call('POST', `/v1/me/org-memberships/${membership.id}/chat-token`, {});
    expect(refused.json().error.code).toBe('MEMBER_DISABLED');
    await owner.call('PATCH', `${base}/members/${staffId}`, { status: 'active' });
    expect(await loginFailure(await staff.workCredential())).toBeNull();
  });

  it('leaves a removed person no chat for the business by any route', async () => {
    const { app, owner, staff, base, staffId, opens } = await shop();
    const room = await opens(await app.user('cleo'));
    const credential = await staff.workCredential();
    const sam = await app.online(credential);
    expect((await owner.call('DELETE', `${base}/members/${staffId}`)).statusCode).toBe(200);
    expect(await loginFailure(credential)).toBe('not-authorized');
    expect((await staff.call('GET', '/v1/me/org-memberships')).json().items).toEqual([]);
    // Their personal identity is a stranger to the business's rooms.
    const home = await staff.personal();
    expect((await enter(home, room, 'Sam')).attrs.type).toBe('error');
    // The session they had open was closed with the removal.
    expect(await closed(sam)).toBe(true);
  });

  it('leaves a business that was declined unable to message the person, on the server too', async () => {
    const { app, owner, base } = await shop();
    const ana = await app.user('ana');
    const invited = await owner.call('POST', `${base}/members`, { code: await ana.code() });
    await ana.call('POST', `/v1/me/org-invites/${invited.json().id}/decline`);
    expect(
      (await owner.call('POST', `${base}/conversations`, { code: await ana.code() })).json().error.code,
    ).toBe('PERSON_DECLINED');
    const [boss, home] = [await owner.atWork(), await ana.personal()];
    const id = `direct-${Date.now()}`;
    await boss.xmpp.send(
      xml('message', { to: home.credential.jid, type: 'chat', id }, xml('body', {}, 'Hi!')),
    );
    expect(await bounce(boss, id)).toBe('forbidden');
  });

  it('makes group chats of team members that nobody else enters', async () => {
    const { app, owner, staff, base } = await shop();
    const other = await app.user('other');
    const invited = await owner.call('POST', `${base}/members`, { code: await other.code() });
    await other.call('POST', `/v1/me/org-invites/${invited.json().id}/accept`);
    const ownerId = (await owner.call('GET', `${base}/members?status=active`))
      .json()
      .items.find((p: { role: string }) => p.role === 'owner').id;
    const group = await staff.call('POST', `${base}/groups`, { name: 'Night shift', members: [ownerId] });
    expect(group.statusCode, group.body).toBe(201);
    const { jid } = group.json();
    const [sam, boss, outsider] = [await staff.atWork(), await owner.atWork(), await other.atWork()];
    // Both members' bookmarks, written together: each holds the group, the outsider's does not.
    expect(await bookmarks(boss)).toContain(jid);
    expect(await bookmarks(sam)).toContain(jid);
    expect(await bookmarks(outsider)).not.toContain(jid);
    expect((await enter(sam, jid, 'Sam')).attrs.type).toBeUndefined();
    expect((await enter(boss, jid, 'Boss')).attrs.type).toBeUndefined();
    expect(
      (await enter(outsider, jid, 'Other')).getChild('error')?.getChild('registration-required'),
    ).toBeDefined();
  });
});

describe('a business’s usage', () => {
  it('counts its identities as its monthly active users and its calls as its minutes, in the org reports', async () => {
    const { app, owner, staff, business, base, staffId } = await shop();
    await staff.atWork();
    await owner.atWork();
    await (await app.user('cleo')).personal();
    const [mine] = (await owner.call('GET', '/v1/me/org-memberships')).json().items;
    const callPath = `/v1/me/org-memberships/${mine.id}/call-token`;
    const minted = await owner.call('POST', callPath, { with: staffId });
    expect(minted.statusCode, minted.body).toBe(200);
    const participant = await joinLive(minted.json().url, minted.json().token);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await participant.leave();
    await file.ctx.container.accrual.flush();
    const today = new Date().toISOString().slice(0, 10);
    const report = async () =>
      (await app.asApp('GET', `/v1/orgs/${business.id}/usage?frm=${today}&to=${today}`)).json() as {
        usage: { product: string; metric: string; quantity: number }[];
      };
    let usage = (await report()).usage;
    for (let i = 0; i < 50 && !usage.some((line) => line.product !== 'chat'); i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      usage = (await report()).usage;
    }
    const quantity = (metric: string) =>
      usage.filter((line) => line.metric === metric).reduce((sum, line) => sum + line.quantity, 0);
    // The owner and the staff member; the customer is the app's own user.
    expect(quantity('monthly_active_users')).toBe(2);
    expect(
      usage.some((line) => line.product !== 'chat'),
      JSON.stringify(usage),
    ).toBe(true);
    const all = (await app.asApp('GET', `/v1/orgs/usage?frm=${today}&to=${today}`)).json();
    expect(all.items.map((item: { id: string }) => item.id)).toEqual([business.id]);
    // Calls off: no new call tokens.
    await owner.call('PATCH', base, { calls: false });
    expect((await owner.call('POST', callPath, { with: staffId })).json().error.code).toBe('CALLS_OFF');
  });
});
