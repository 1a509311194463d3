import { decodeJwt } from 'jose';
import { RoomServiceClient } from 'livekit-server-sdk';
import { sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { EVENT_RETENTION_MS, RECONCILE_GRACE_MS } from '../src/modules/live/service.js';
import { liveStore } from '../src/modules/live/store.js';
import { REAL_APP_IDS } from './identities.js';
import { liveSessionsOf } from './ledger.js';
import { attributes, deliver as deliverTo, participant, post, webhook } from './livekit-webhooks.js';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  // No free minutes in this file, so that every metered second shows its price.
  ctx = await startTestApp({
    settings: {
      SVC_FREE_ALLOWANCES: 'live.fhd_minutes=0,calls.hd_minutes=0,calls.fhd_minutes=0,calls.audio_minutes=0',
    },
  });
});
afterAll(async () => {
  await ctx.close();
});

/** The claims of a LiveKit access token that the tests read. */
interface LiveClaims {
  sub: string;
  exp: number;
  nbf: number;
  video: Record<string, unknown>;
  attributes: Record<string, string>;
  roomConfig: Record<string, unknown>;
}

const mint = (token: string, payload: object) =>
  ctx.app.inject({
    method: 'POST',
    url: '/v1/realtime/live/tokens',
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: uniqueAddress(),
    payload,
  });

const deliver = (event: Record<string, unknown>, sign = true) => deliverTo(ctx, event, sign);

const usageRows = async (accountId: string) =>
  (await ctx.container.billing.usageReport(accountId, 'test', 1)).usage.filter((row) =>
    ['live', 'calls'].includes(row.product),
  );

describe('POST /v1/realtime/live/tokens', () => {
  it('mints a LiveKit token for the app-scoped room, with viewer grants by default', async () => {
    const { token, app } = await createCustomer(ctx.container);
    const response = await mint(token, { room: 'Show_1', identity: 'viewer-7' });
    expect(response.statusCode).toBe(200);
    const body = response.json();
    const settings = await ctx.container.realtime.ensure({ appId: app.id, mode: 'test' });
    expect(body).toEqual({
      url: ctx.container.settings.SVC_LIVEKIT_PUBLIC_URL,
      token: expect.any(String),
      room: `${settings.chat_prefix}.Show_1`,
      expires_in: 7_200,
    });
    const claims = decodeJwt<LiveClaims>(body.token);
    expect(claims.sub).toBe('viewer-7');
    expect(claims.exp - claims.nbf).toBe(7_200);
    expect(claims.video).toMatchObject({
      room: body.room,
      roomJoin: true,
      canSubscribe: true,
      canPublish: false,
      canPublishData: false,
    });
    expect(claims.attributes).toEqual({ 'svc.kind': 'live', 'svc.quality': 'hd', 'svc.publisher': 'false' });

    // The room's limits ride in the token: LiveKit makes the room on the first join, not at minting.
    expect(claims.roomConfig).toMatchObject({
      maxParticipants: 100,
      emptyTimeout: 300,
      departureTimeout: 20,
    });
    const rooms = new RoomServiceClient(
      ctx.container.settings.SVC_LIVEKIT_URL,
      ctx.container.settings.SVC_LIVEKIT_API_KEY,
      ctx.container.settings.SVC_LIVEKIT_API_SECRET,
    );
    expect(await rooms.listRooms([body.room])).toEqual([]);
  });

  it('grants publishers camera, microphone and screen share, and audio rooms the microphone only', async () => {
    const { token } = await createCustomer(ctx.container);
    const grant = async (payload: object) =>
      decodeJwt<LiveClaims>((await mint(token, payload)).json().token).video;
    expect(await grant({ room: 'r', identity: 'host', publish: true, quality: 'fhd' })).toMatchObject({
      canPublish: true,
      canPublishSources: ['camera', 'microphone', 'screen_share', 'screen_share_audio'],
    });
    expect(await grant({ room: 'r', identity: 'a', kind: 'call' })).toMatchObject({ canPublish: true });
    expect(await grant({ room: 'r', identity: 'a', kind: 'audio' })).toMatchObject({
      canPublishSources: ['microphone'],
    });
    expect(await grant({ room: 'r', identity: 'a', kind: 'audio', publish: false })).toMatchObject({
      canPublish: false,
    });
  });

  it.each([
    [{ identity: 'a' }, 'room'],
    [{ room: 'show\u202Ewoh', identity: 'a' }, 'room'],
    [{ room: ' show', identity: 'a' }, 'room'],
    [{ room: 'r'.repeat(129), identity: 'a' }, 'room'],
    [{ room: '🎥'.repeat(33), identity: 'a' }, 'room'],
    [{ room: 'r' }, 'identity'],
    [{ room: 'r', identity: '' }, 'identity'],
    [{ room: 'r', identity: 'ana\u202Etxt' }, 'identity'],
    [{ room: 'r', identity: '\u2067ana' }, 'identity'],
    [{ room: 'r', identity: 'a\u0085b' }, 'identity'],
    [{ room: 'r', identity: 'ana ' }, 'identity'],
    [{ room: 'r', identity: 'i'.repeat(129) }, 'identity'],
    // 65 characters, but 260 bytes: LiveKit refuses identities over 256 bytes at the join.
    [{ room: 'r', identity: '😀'.repeat(65) }, 'identity'],
    [{ room: 'r', identity: 'a', kind: 'video' }, 'kind'],
    [{ room: 'r', identity: 'a', quality: '8k' }, 'quality'],
    [{ room: 'r', identity: 'a', publish: 'yes' }, 'publish'],
    [{ room: 'r', identity: 'a', ttl_seconds: 59 }, 'ttl_seconds'],
    [{ room: 'r', identity: 'a', ttl_seconds: 86_401 }, 'ttl_seconds'],
  ])('refuses %j with 422 on %s', async (payload, field) => {
    const { token } = await createCustomer(ctx.container);
    const response = await mint(token, payload);
    expect(response.statusCode).toBe(422);
    expect(response.json().error.fields.map((f: { field: string }) => f.field)).toContain(field);
  });

  it('accepts the limits themselves', async () => {
    const { token } = await createCustomer(ctx.container);
    for (const ttl of [60, 86_400]) {
      const response = await mint(token, {
        room: 'r'.repeat(128),
        identity: 'i'.repeat(128),
        ttl_seconds: ttl,
      });
      expect(response.statusCode).toBe(200);
      expect(response.json().expires_in).toBe(ttl);
    }
  });

  it.each(Object.entries(REAL_APP_IDS))(
    'takes %s as identity and room name, in a token LiveKit itself accepts',
    async (_kind, id) => {
      const { token, app } = await createCustomer(ctx.container);
      const response = await mint(token, { room: id, identity: id });
      expect(response.statusCode).toBe(200);
      const body = response.json();
      const settings = await ctx.container.realtime.ensure({ appId: app.id, mode: 'test' });
      expect(body.room).toBe(`${settings.chat_prefix}.${id}`);
      expect(decodeJwt<LiveClaims>(body.token).sub).toBe(id);
      // LiveKit's own check of a join (identity and room name limits), without joining.
      const validated = await fetch(
        `${ctx.container.settings.SVC_LIVEKIT_URL}/rtc/validate?access_token=${body.token}`,
      );
      expect({ status: validated.status, body: await validated.text() }).toEqual({
        status: 200,
        body: 'success',
      });
    },
  );

  it('answers 402 to a live key on an empty balance, and 403 when the product is off', async () => {
    const live = await createCustomer(ctx.container, { mode: 'live' });
    expect((await mint(live.token, { room: 'r', identity: 'a' })).json().error.code).toBe('PAYMENT_REQUIRED');
    const test = await createCustomer(ctx.container);
    await ctx.app.inject({
      method: 'PATCH',
      url: '/v1/realtime/app',
      headers: { authorization: `Bearer ${test.token}` },
      payload: { products: ['chat', 'calls'] },
    });
    const off = await mint(test.token, { room: 'r', identity: 'a' });
    expect(off.statusCode).toBe(403);
    expect(off.json().error.code).toBe('PRODUCT_DISABLED');
    expect((await mint(test.token, { room: 'r', identity: 'a', kind: 'call' })).statusCode).toBe(200);
  });
});

/** The app-scoped LiveKit room a token is minted for. */
async function room(token: string, name: string) {
  return (await mint(token, { room: name, identity: 'x' })).json().room as string;
}

describe('LiveKit webhooks', () => {
  it('meter a publisher’s minutes at the higher of the declared and the published quality, once', async () => {
    const { token, account } = await createCustomer(ctx.container);
    const name = await room(token, 'stage');
    const joined = new Date(ctx.clock.now().getTime() - 90_000);
    const who = participant(
      'PA_pub1',
      name,
      { 'svc.kind': 'live', 'svc.quality': 'hd', 'svc.publisher': 'true' },
      joined,
    );
    expect((await deliver({ event: 'participant_joined', ...who })).json()).toEqual({ applied: true });
    await deliver({
      event: 'track_published',
      room: { name },
      participant: { sid: who.participant.sid, identity: who.participant.identity },
      track: { sid: 'TR_1', type: 'VIDEO', width: 1920, height: 1080 },
    });
    const left = await webhook(ctx, { event: 'participant_left', ...who });
    expect((await post(ctx, left)).json()).toEqual({ applied: true });
    expect((await post(ctx, left)).json()).toEqual({ applied: false });
    expect(await usageRows(account.id)).toEqual([
      expect.objectContaining({ product: 'live', metric: 'fhd_minutes', quantity: 1.5, cost_micros: 3_000 }),
    ]);
  });

  it('meter audio rooms at the audio price, calls as calls, and never an aborted connection', async () => {
    const { token, account } = await createCustomer(ctx.container);
    const name = await room(token, 'talk');
    const joined = new Date(ctx.clock.now().getTime() - 60_000);
    const speaker = participant(
      'PA_aud',
      name,
      { 'svc.kind': 'audio', 'svc.quality': '4k', 'svc.publisher': 'true' },
      joined,
    );
    const caller = participant(
      'PA_call',
      name,
      { 'svc.kind': 'call', 'svc.quality': 'hd', 'svc.publisher': 'true' },
      joined,
    );
    const aborted = participant(
      'PA_gone',
      name,
      { 'svc.kind': 'call', 'svc.quality': 'hd', 'svc.publisher': 'true' },
      joined,
    );
    for (const who of [speaker, caller, aborted]) await deliver({ event: 'participant_joined', ...who });
    await deliver({ event: 'participant_connection_aborted', ...aborted });
    await deliver({ event: 'participant_left', ...speaker });
    await deliver({ event: 'room_finished', room: { name } });
    const rows = await usageRows(account.id);
    expect(rows).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ product: 'calls', metric: 'audio_minutes', quantity: 1, cost_micros: 500 }),
        expect.objectContaining({ product: 'calls', metric: 'hd_minutes', quantity: 1, cost_micros: 1_500 }),
      ]),
    );
    expect(rows).toHaveLength(2);
  });

  it('bill a participant who left within its first second for that second', async () => {
    // LiveKit stamps the leave to the whole second, which can fall before a join 0.7 s into it.
    const { token, account } = await createCustomer(ctx.container);
    const name = await room(token, 'blink');
    const second = Math.floor(ctx.clock.now().getTime() / 1000) - 5;
    const who = participant('PA_blink', name, attributes('live', 'fhd'), new Date(second * 1000 + 700));
    await deliver({ event: 'participant_joined', ...who });
    await deliver({ event: 'participant_left', createdAt: String(second), ...who });
    expect(await usageRows(account.id)).toEqual([
      expect.objectContaining({ product: 'live', metric: 'fhd_minutes', quantity: 0.016667 }),
    ]);
  });

  it('end an identity’s earlier session when it joins again, so no second is billed twice', async () => {
    // Another device, or a LiveKit node that died without a leave: LiveKit allows one per identity.
    const { token, account } = await createCustomer(ctx.container);
    const name = await room(token, 'rejoin');
    const now = ctx.clock.now().getTime();
    const sameIdentity = (who: ReturnType<typeof participant>) => ({
      ...who,
      participant: { ...who.participant, identity: 'caller' },
    });
    const first = sameIdentity(
      participant('PA_first', name, attributes('call', 'hd'), new Date(now - 120_000)),
    );
    const again = sameIdentity(
      participant('PA_again', name, attributes('call', 'hd'), new Date(now - 60_000)),
    );
    await deliver({ event: 'participant_joined', ...first });
    await deliver({ event: 'participant_joined', ...again });
    // The first's own join, delivered late, leaves the later session open.
    await deliver({ event: 'participant_joined', ...first });
    await deliver({ event: 'participant_left', ...first });
    await deliver({ event: 'participant_left', ...again });
    const sessions = await liveSessionsOf(ctx.container, account.id);
    expect(sessions.map((session) => session.billed_seconds)).toEqual([60, 60]);
    expect(sessions[0]?.left_at).toEqual(sessions[1]?.joined_at);
    expect(await usageRows(account.id)).toEqual([
      expect.objectContaining({ product: 'calls', metric: 'hd_minutes', quantity: 2 }),
    ]);
  });

  it('end at room_finished only the sessions of that incarnation of the room', async () => {
    // A room re-created under its name after its node died: the dead one's sessions are the reconciler's.
    const { token, account } = await createCustomer(ctx.container);
    const name = await room(token, 'reborn');
    const now = ctx.clock.now().getTime();
    const orphan = participant('PA_orphan', name, attributes('call', 'hd'), new Date(now - 120_000));
    const current = participant('PA_current', name, attributes('call', 'hd'), new Date(now - 30_000));
    await deliver({ event: 'participant_joined', ...orphan });
    await deliver({ event: 'participant_joined', ...current });
    const recreated = String(Math.floor((now - 40_000) / 1000));
    await deliver({ event: 'room_finished', room: { name, creationTime: recreated } });
    const sessions = await liveSessionsOf(ctx.container, account.id);
    const byStart = (sid: string) => sessions.find((session) => session.identity === `user-${sid}`);
    expect(byStart(current.participant.sid)?.billed_seconds).toBe(30);
    expect(byStart(orphan.participant.sid)?.left_at).toBeNull();
  });

  it('with a bad or missing signature are refused and change nothing', async () => {
    const { token, account } = await createCustomer(ctx.container);
    const name = await room(token, 'forged');
    const who = participant(
      'PA_forged',
      name,
      { 'svc.kind': 'live', 'svc.quality': '4k', 'svc.publisher': 'true' },
      new Date(0),
    );
    const unsigned = await deliver({ event: 'participant_left', ...who }, false);
    expect(unsigned.statusCode).toBe(401);
    const signed = await webhook(ctx, { event: 'participant_joined', ...who });
    const forged = await post(ctx, {
      ...signed,
      body: signed.body.replace('participant_joined', 'participant_left'),
    });
    expect(forged.statusCode).toBe(401);
    expect(forged.json().error.type).toBe('authentication_error');
    expect(await usageRows(account.id)).toEqual([]);
  });
});

describe('reconciliation', () => {
  /**
   * A caller who joined 5 minutes ago (to the second) and whom an earlier pass saw in LiveKit two
   * minutes after the join; LiveKit's room, never made, lists nobody now.
   */
  async function seenTwoMinutesIn(tag: string) {
    const { token, account } = await createCustomer(ctx.container);
    const name = await room(token, tag);
    const joined = new Date(Math.floor(ctx.clock.now().getTime() / 1000) * 1000 - 5 * 60_000);
    const who = participant(
      `PA_${tag}`,
      name,
      { 'svc.kind': 'call', 'svc.quality': 'fhd', 'svc.publisher': 'true' },
      joined,
    );
    await deliver({ event: 'participant_joined', ...who });
    await ctx.container.pool.query(sql.unsafe`
      update live_sessions set last_seen_at = ${sql.timestamp(new Date(joined.getTime() + 120_000))}
      where participant_sid = ${who.participant.sid}`);
    return { account, joined, who };
  }

  it('closes a session LiveKit no longer lists, billing it up to when it was last seen', async () => {
    const { account, who } = await seenTwoMinutesIn('lost');
    // Now nobody is in the LiveKit room and the leave was never delivered: a pass finds the session
    // missing, and once it has been missing for the grace period the session is closed at its last
    // sighting and billed up to it, not a second more. (The test stack's own control plane may have
    // noted it missing first, by real time.)
    ctx.clock.advance(RECONCILE_GRACE_MS + 1_000);
    await ctx.container.live.reconcile();
    ctx.clock.advance(RECONCILE_GRACE_MS + 1_000);
    await ctx.container.live.reconcile();
    expect(await usageRows(account.id)).toEqual([
      expect.objectContaining({ product: 'calls', metric: 'fhd_minutes', quantity: 2, cost_micros: 6_000 }),
    ]);
    // The leave arriving late after all adds nothing.
    await deliver({ event: 'participant_left', ...who });
    expect(await usageRows(account.id)).toEqual([expect.objectContaining({ quantity: 2 })]);
    ctx.clock.set(new Date());
  });

  it('lets a leave LiveKit is still retrying win over a pass that finds the participant gone', async () => {
    const { account, joined, who } = await seenTwoMinutesIn('retried');
    // Gone from LiveKit's room, last seen minutes ago, its leave not delivered yet: noted, not closed.
    await ctx.container.live.reconcile();
    expect(await usageRows(account.id)).toEqual([]);
    // LiveKit's retry arrives: the session is billed up to the leave (3 minutes after the join).
    await deliver({
      event: 'participant_left',
      createdAt: String(joined.getTime() / 1000 + 180),
      ...who,
    });
    ctx.clock.advance(RECONCILE_GRACE_MS + 1_000);
    await ctx.container.live.reconcile();
    expect(await usageRows(account.id)).toEqual([
      expect.objectContaining({ product: 'calls', metric: 'fhd_minutes', quantity: 3 }),
    ]);
    ctx.clock.set(new Date());
  });
});

describe('webhook ids', () => {
  it('are kept for a week to recognise retries, then pruned', async () => {
    const store = liveStore(ctx.container.pool);
    const now = ctx.clock.now();
    const tag = `prune-${Date.now()}`;
    const old = new Date(now.getTime() - EVENT_RETENTION_MS - 60_000);
    const recent = new Date(now.getTime() - EVENT_RETENTION_MS + 60_000);
    for (let i = 0; i < 3; i += 1) await store.claimEvent(`${tag}-old-${i}`, 'room_started', old);
    await store.claimEvent(`${tag}-recent`, 'room_started', recent);
    const { pruned } = await ctx.container.live.pruneEvents();
    expect(pruned).toBeGreaterThanOrEqual(3);
    const left = await ctx.container.pool.anyFirst(
      sql.type(z.object({ id: z.string() }))`select id from livekit_events where id like ${`${tag}-%`}`,
    );
    expect(left).toEqual([`${tag}-recent`]);
    // A retry of the recent one is still recognised.
    expect(await store.claimEvent(`${tag}-recent`, 'room_started', now)).toBe(false);
  });
});
