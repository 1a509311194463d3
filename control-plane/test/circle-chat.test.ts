import { describe, expect, it } from 'vitest';
import {
  archive,
  bookmarks,
  bounce,
  type ChatSession,
  closed,
  enter,
  hears,
  joinedOnLogin,
  loginFailure,
  post,
  statuses,
} from '../../e2e/support/xmpp.js';
import { circleNick } from '../src/modules/orgs/circles.js';
import { type AppUser, appWithUsers, chatTestFile } from './app-users.js';
import { ejabberdAsOperator, testSettings } from './support.js';

// A circle's rules on the real ejabberd, tried with xmpp.js clients: its rooms (svc_circles), who may
// post on a board or in an archived room decided by mod_svc_scope asking the test stack's control
// plane (which shares this database), who enters a closed room decided by its affiliations.

const file = chatTestFile();

/** A member's nickname in the circle's rooms: the name they choose, tagged with their identity. */
const nickOf = (session: ChatSession, name: string) =>
  circleNick(name, session.credential.user.split('@')[0]!.split('.')[2]!);
/** Enters a circle's room under the member's own tag. */
const enterAs = (session: ChatSession, room: string, name: string) =>
  enter(session, room, nickOf(session, name));

type Circle = {
  id: string;
  code: string;
  boards: { id: string; jid: string }[];
  rooms: { id: string; jid: string }[];
  me: { member_id: string };
};

/** A circle with its owner (who is on it), of the join rule given. */
async function circleOf(joinRule: 'open' | 'approval' | 'invite') {
  const app = await appWithUsers(file.ctx, file.sessions);
  const owner = await app.user('owner');
  const created = await owner.call('POST', '/v1/me/circles', { name: 'Runners', join_rule: joinRule });
  expect(created.statusCode, created.body).toBe(201);
  const circle = created.json() as Circle;
  const base = `/v1/me/circles/${circle.id}`;
  const board = circle.boards[0]!.jid;
  const general = circle.rooms[0]!.jid;
  /** Joins by code: the member id. */
  const joins = async (who: AppUser) => {
    const joined = await who.call('POST', `/v1/me/codes/${circle.code}/join`);
    expect(joined.statusCode, joined.body).toBe(200);
    return joined.json() as { status: string; member_id: string };
  };
  return { app, owner, circle, base, board, general, joins };
}

/** An open circle with a mod and a member, both online and in its General room. */
async function runningClub() {
  const made = await circleOf('open');
  const [modUser, memberUser] = [await made.app.user('mo'), await made.app.user('mia')];
  const modId = (await made.joins(modUser)).member_id;
  const memberId = (await made.joins(memberUser)).member_id;
  expect((await made.owner.call('PATCH', `${made.base}/members/${modId}`, { role: 'mod' })).statusCode).toBe(
    200,
  );
  const [owner, mod, member] = [await made.owner.atWork(), await modUser.atWork(), await memberUser.atWork()];
  for (const [session, nick] of [
    [owner, 'Owner'],
    [mod, 'Mo'],
    [member, 'Mia'],
  ] as const)
    expect((await enterAs(session, made.general, nick)).attrs.type).toBeUndefined();
  return { ...made, modUser, memberUser, modId, memberId, sessions: { owner, mod, member } };
}

describe('joining a circle', () => {
  it('open: a member chats in General at once; a stranger’s own identity reaches none of its rooms', async () => {
    const { app, owner, general, joins } = await circleOf('open');
    const ana = await app.user('ana');
    expect((await joins(ana)).status).toBe('member');
    const [boss, member] = [await owner.atWork(), await ana.atWork()];
    await enterAs(boss, general, 'Boss');
    expect((await enterAs(member, general, 'Ana')).attrs.type).toBeUndefined();
    const heard = hears(boss, general, 'Hello runners');
    await post(member, general, 'Hello runners');
    expect(await heard).toBe(true);
    // Their bookmarks list the board and General, both joined on login.
    const listed = await joinedOnLogin(member);
    expect(listed).toHaveLength(2);
    expect(listed).toContain(general);

    // Under another member's tag, nobody enters.
    const impostor = await enter(member, general, nickOf(boss, 'Ana'));
    expect(impostor.attrs.type).toBe('error');
    expect(impostor.getChild('error')?.getChild('forbidden')).toBeTruthy();

    const stranger = await (await app.user('zed')).personal();
    const refused = await enter(stranger, general, 'Zed');
    expect(refused.attrs.type).toBe('error');
    expect(refused.getChild('error')?.getChild('forbidden')).toBeTruthy();
  });

  it('approval: in once approved; a rejected asker has no identity to log in with', async () => {
    const { app, owner, base, general, joins } = await circleOf('approval');
    const [ana, bo] = [await app.user('ana'), await app.user('bo')];
    const asked = await joins(ana);
    expect(asked.status).toBe('requested');
    // Asking gives no identity yet.
    expect((await ana.call('GET', '/v1/me/org-memberships')).json().items).toEqual([]);
    await owner.call('POST', `${base}/requests/${asked.member_id}/approve`);
    expect((await enterAs(await ana.atWork(), general, 'Ana')).attrs.type).toBeUndefined();

    const other = await joins(bo);
    await owner.call('POST', `${base}/requests/${other.member_id}/reject`);
    expect((await bo.call('GET', '/v1/me/org-memberships')).json().items).toEqual([]);
    const token = await bo.call('POST', `/v1/me/org-memberships/${other.member_id}/chat-token`, {});
    expect(token.statusCode).toBe(404);
  });

  it('invite: a stranger is refused by code, the invited one joins and logs in', async () => {
    const { app, owner, base, general, circle } = await circleOf('invite');
    const [ana, bo] = [await app.user('ana'), await app.user('bo')];
    expect((await bo.call('POST', `/v1/me/codes/${circle.code}/join`)).statusCode).toBe(403);
    await owner.call('POST', `${base}/members`, { code: await ana.code() });
    expect((await ana.call('POST', `/v1/me/codes/${circle.code}/join`)).json().status).toBe('member');
    expect((await enterAs(await ana.atWork(), general, 'Ana')).attrs.type).toBeUndefined();
  });
});

describe('boards', () => {
  it('refuse a member’s post on the chat server, and carry a mod’s to every member in it', async () => {
    const { board, sessions: s } = await runningClub();
    for (const [session, nick] of [
      [s.member, 'Mia'],
      [s.mod, 'Mo'],
      [s.owner, 'Owner'],
    ] as const)
      expect((await enterAs(session, board, nick)).attrs.type).toBeUndefined();
    const refused = await post(s.member, board, 'Free shoes!');
    expect(await bounce(s.member, refused)).toBe('forbidden');
    const toMember = hears(s.member, board, 'Race on Sunday');
    const toOwner = hears(s.owner, board, 'Race on Sunday');
    await post(s.mod, board, 'Race on Sunday');
    expect(await toMember).toBe(true);
    expect(await toOwner).toBe(true);
  });

  it('are never left, only muted: a muted board stays bookmarked, not joined on login', async () => {
    const { base, board, circle, memberUser, sessions: s } = await runningClub();
    const boardId = circle.boards[0]!.id;
    expect((await memberUser.call('POST', `${base}/rooms/${boardId}/leave`)).statusCode).toBe(409);
    expect(await joinedOnLogin(s.member)).toContain(board);
    expect((await memberUser.call('POST', `${base}/rooms/${boardId}/mute`, { muted: true })).statusCode).toBe(
      200,
    );
    expect(await bookmarks(s.member)).toContain(board);
    expect(await joinedOnLogin(s.member)).not.toContain(board);
  });
});

describe('moderation', () => {
  it('a block sends the member out of every room at once, ends their file.sessions, and bars their return', async () => {
    const made = await runningClub();
    const { owner, base, general, circle, memberUser, memberId, sessions: s } = made;
    const closedRoom = (
      await owner.call('POST', `${base}/rooms`, { kind: 'room', name: 'Coaches', open: false })
    ).json();
    await owner.call('POST', `${base}/rooms/${closedRoom.id}/members`, { member_id: memberId });
    await enterAs(s.owner, closedRoom.jid, 'Owner');
    expect((await enterAs(s.member, closedRoom.jid, 'Mia')).attrs.type).toBeUndefined();
    const banned = (room: string) =>
      s.owner.next(
        (stanza) =>
          stanza.is('presence') &&
          stanza.attrs.from === `${room}/${nickOf(s.member, 'Mia')}` &&
          stanza.attrs.type === 'unavailable' &&
          statuses(stanza).includes('301'),
      );
    const outOfGeneral = banned(general);
    const outOfClosed = banned(closedRoom.jid);
    const credential = s.member.credential;
    const blocked = await owner.call('PATCH', `${base}/members/${memberId}`, { status: 'blocked' });
    expect(blocked.statusCode, blocked.body).toBe(200);
    await Promise.all([outOfGeneral, outOfClosed]);
    expect(await closed(s.member)).toBe(true);
    expect(await loginFailure(credential)).not.toBeNull();
    expect((await memberUser.call('POST', `/v1/me/codes/${circle.code}/join`)).statusCode).toBe(403);

    // Restored: a new credential, the auto-join rooms take them again, the closed one when re-added.
    await owner.call('PATCH', `${base}/members/${memberId}`, { status: 'active' });
    const back = await memberUser.atWork();
    expect((await enterAs(back, general, 'Mia')).attrs.type).toBeUndefined();
    expect((await enterAs(back, closedRoom.jid, 'Mia')).attrs.type).toBe('error');
    await owner.call('POST', `${base}/rooms/${closedRoom.id}/members`, { member_id: memberId });
    expect((await enterAs(back, closedRoom.jid, 'Mia')).attrs.type).toBeUndefined();
  });

  it('a closed room takes only its members; a mod takes one out, and the room sends them out', async () => {
    const { owner, base, modUser, memberId, sessions: s } = await runningClub();
    const room = (
      await owner.call('POST', `${base}/rooms`, { kind: 'room', name: 'Team', open: false })
    ).json();
    const refused = await enterAs(s.member, room.jid, 'Mia');
    expect(refused.attrs.type).toBe('error');
    expect(refused.getChild('error')?.getChild('registration-required')).toBeTruthy();
    await owner.call('POST', `${base}/rooms/${room.id}/members`, { member_id: memberId });
    expect((await enterAs(s.member, room.jid, 'Mia')).attrs.type).toBeUndefined();
    expect(await bookmarks(s.member)).toContain(room.jid);
    const sentOut = s.member.next(
      (stanza) =>
        stanza.is('presence') &&
        stanza.attrs.from === `${room.jid}/${nickOf(s.member, 'Mia')}` &&
        stanza.attrs.type === 'unavailable',
    );
    expect((await modUser.call('DELETE', `${base}/rooms/${room.id}/members/${memberId}`)).statusCode).toBe(
      200,
    );
    await sentOut;
    expect(await bookmarks(s.member)).not.toContain(room.jid);
    expect((await enterAs(s.member, room.jid, 'Mia')).attrs.type).toBe('error');
  });
});

describe('rooms', () => {
  it('an archived room leaves every client’s bookmarks, takes no post, and keeps its history', async () => {
    const { app, base, modUser, memberUser, sessions: s } = await runningClub();
    expect((await app.asApp('PATCH', '/v1/realtime/app', { mam: true })).statusCode).toBe(200);
    const room = (await modUser.call('POST', `${base}/rooms`, { kind: 'room', name: 'Spring race' })).json();
    await memberUser.call('POST', `${base}/rooms/${room.id}/join`);
    expect(await bookmarks(s.member)).toContain(room.jid);
    await enterAs(s.member, room.jid, 'Mia');
    await enterAs(s.mod, room.jid, 'Mo');
    const heard = hears(s.mod, room.jid, 'Start at nine');
    await post(s.member, room.jid, 'Start at nine');
    expect(await heard).toBe(true);

    expect((await modUser.call('DELETE', `${base}/rooms/${room.id}`)).statusCode).toBe(200);
    expect(await bookmarks(s.member)).not.toContain(room.jid);
    expect(await bookmarks(s.mod)).not.toContain(room.jid);
    const refused = await post(s.member, room.jid, 'Anyone?');
    expect(await bounce(s.member, refused)).toBe('forbidden');
    expect(await archive(s.member, room.jid)).toEqual(['Start at nine']);
    expect((await enterAs(s.owner, room.jid, 'Owner')).attrs.type).toBe('error');
  });

  it('leaving the circle takes every room out of the member’s app and the member out of every room', async () => {
    const { base, general, memberUser, sessions: s } = await runningClub();
    const user = s.member.credential.user;
    const left = s.owner.next(
      (stanza) =>
        stanza.is('presence') &&
        stanza.attrs.from === `${general}/${nickOf(s.member, 'Mia')}` &&
        stanza.attrs.type === 'unavailable',
    );
    expect((await memberUser.call('POST', `${base}/leave`)).statusCode).toBe(200);
    await left;
    expect(await closed(s.member)).toBe(true);
    const stored = await ejabberdAsOperator(testSettings(), 'private_get', {
      user: user.split('@')[0],
      host: testSettings().SVC_CHAT_DOMAIN,
      element: 'storage',
      ns: 'storage:bookmarks',
    });
    expect(stored.status).toBe(200);
    expect(await stored.text()).not.toContain('conference');
  });
});
