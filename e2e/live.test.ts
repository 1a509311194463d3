/**
 * Real WebRTC participants (@livekit/rtc-node) in the bundled LiveKit with tokens minted by the
 * running control plane: what each kind of token may do, the room limit, and the minutes the
 * control plane meters from LiveKit's webhooks once the participants have left.
 */
import { TrackSource } from 'livekit-server-sdk';
import { describe, expect, it } from 'vitest';
import { expectBilled, mint, type TokenRequest } from './support/live-billing.js';
import { useLiveSuite } from './support/live-suite.js';
import { joinFailure, type LiveParticipant, roomService } from './support/livekit.js';
import { api, type Customer, createCustomer, stackSettings } from './support/stack.js';

/** How long each session stays in the room: long enough to be metered, short enough to keep the suite quick. */
const SESSION_MS = 3_000;

const live = useLiveSuite();

/** Joins with a minted token; the participant leaves after the test whatever happens. */
async function enter(customer: Customer, request: TokenRequest): Promise<LiveParticipant> {
  const { url, token } = await mint(customer, request);
  return live.join(url, token);
}

/** Everyone stays a few seconds, then leaves: a session the control plane will meter. */
async function holdAndLeave(...present: LiveParticipant[]): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, SESSION_MS));
  await Promise.all(present.map((participant) => participant.leave()));
}

/** What LiveKit itself holds for a participant: the permissions its token gave and its tracks. */
async function serverView(participant: LiveParticipant) {
  const info = await roomService().getParticipant(participant.room.name!, participant.identity);
  return { permission: info.permission, sources: info.tracks.map((track) => track.source) };
}

describe('live streams on LiveKit', () => {
  it('streams a publisher’s camera and microphone to a viewer', async () => {
    const customer = await createCustomer(live.container);
    const publisherToken = await mint(customer, { room: 'stage', identity: 'host', publish: true });
    expect(publisherToken.url).toBe(stackSettings().SVC_LIVEKIT_PUBLIC_URL);
    expect(publisherToken.room).toMatch(/^[^.]+\.stage$/);
    expect(publisherToken.expires_in).toBe(7200);

    const host = await live.join(publisherToken.url, publisherToken.token);
    await host.publishVideo(1280, 720);
    await host.publishAudio();
    const viewer = await enter(customer, { room: 'stage', identity: 'fan' });

    expect(await viewer.waitForRemoteTrack('host', 'video')).toMatchObject({ width: 1280, height: 720 });
    expect(await viewer.waitForRemoteTrack('host', 'audio')).toMatchObject({ kind: 'audio' });
    const hostView = await serverView(host);
    expect(hostView.permission?.canPublishSources).toEqual(
      expect.arrayContaining([TrackSource.CAMERA, TrackSource.MICROPHONE, TrackSource.SCREEN_SHARE]),
    );
    expect(hostView.sources.sort()).toEqual([TrackSource.CAMERA, TrackSource.MICROPHONE]);
  });

  it('refuses a viewer’s tracks: its token lets it watch only', async () => {
    const customer = await createCustomer(live.container);
    const viewer = await enter(customer, { room: 'stage', identity: 'fan' });

    // LiveKit ignores a refused publish request (it logs "no permission to publish track"); the
    // client gives up after its own 10 s. LiveKit's permissions show no other source would do.
    await expect(viewer.publishVideo(640, 360)).rejects.toThrow(/timed out|not allowed|permission/i);
    const view = await serverView(viewer);
    expect(view.permission).toMatchObject({ canSubscribe: true, canPublish: false, canPublishData: false });
    expect(view.permission?.canPublishSources).toEqual([]);
    expect(view.sources).toEqual([]);
  });

  it('bills the minutes of a publisher and a viewer at their quality, and takes a live key’s from the balance', async () => {
    const openingMicros = 5_000_000;
    const customer = await createCustomer(live.container, { mode: 'live', balanceMicros: openingMicros });
    const price = await live.priceBeyondAllowance(customer, 'live', 'hd_minutes');
    const host = await enter(customer, { room: 'show', identity: 'host', publish: true });
    await host.publishVideo(1280, 720);
    const viewer = await enter(customer, { room: 'show', identity: 'fan' });
    await viewer.waitForRemoteTrack('host', 'video');
    await holdAndLeave(host, viewer);

    const { report } = await expectBilled(customer, 'live', 'hd_minutes', price, [host, viewer]);
    expect(report.usage.filter((row) => row.product === 'live').map((row) => row.metric)).toEqual([
      'hd_minutes',
    ]);
    const balance = await api<{ balance_micros: number }>(customer, 'GET', '/v1/realtime/balance');
    expect(report.total.cost_micros).toBeGreaterThan(0);
    expect(balance.body.balance_micros).toBe(openingMicros - report.total.cost_micros);
  });
});

describe('calls and audio rooms on LiveKit', () => {
  it('bills a caller declared hd who sends 1080p at the fhd price', async () => {
    const customer = await createCustomer(live.container);
    const fhdPrice = await live.priceBeyondAllowance(customer, 'calls', 'fhd_minutes');
    const hdPrice = await live.priceBeyondAllowance(customer, 'calls', 'hd_minutes');
    // Calls publish by default; both declare hd.
    const ana = await enter(customer, { room: 'standup', identity: 'ana', kind: 'call', quality: 'hd' });
    const bo = await enter(customer, { room: 'standup', identity: 'bo', kind: 'call', quality: 'hd' });
    await ana.publishVideo(1920, 1080);
    await bo.publishVideo(1280, 720);
    expect(await bo.waitForRemoteTrack('ana', 'video')).toMatchObject({ width: 1920, height: 1080 });
    expect(await ana.waitForRemoteTrack('bo', 'video')).toMatchObject({ width: 1280, height: 720 });
    await holdAndLeave(ana, bo);

    await expectBilled(customer, 'calls', 'fhd_minutes', fhdPrice, [ana]);
    await expectBilled(customer, 'calls', 'hd_minutes', hdPrice, [bo]);
  });

  it('lets an audio token publish a microphone but not a camera, and bills audio minutes', async () => {
    const customer = await createCustomer(live.container);
    const price = await live.priceBeyondAllowance(customer, 'calls', 'audio_minutes');
    const dj = await enter(customer, { room: 'radio', identity: 'dj', kind: 'audio' });
    const listener = await enter(customer, { room: 'radio', identity: 'listener', kind: 'audio' });

    await dj.publishAudio();
    await listener.waitForRemoteTrack('dj', 'audio');
    // Refused as a viewer's tracks are (see above): the client gives up after 10 s.
    await expect(dj.publishVideo(640, 360)).rejects.toThrow(/timed out|not allowed|permission/i);
    const view = await serverView(dj);
    expect(view.permission?.canPublishSources).toEqual([TrackSource.MICROPHONE]);
    expect(view.sources).toEqual([TrackSource.MICROPHONE]);
    // The refusal's 10 s were enough of a session.
    await Promise.all([dj.leave(), listener.leave()]);

    await expectBilled(customer, 'calls', 'audio_minutes', price, [dj, listener]);
  });

  it('refuses the participant past the app’s max_room_size', async () => {
    const customer = await createCustomer(live.container);
    expect((await api(customer, 'PATCH', '/v1/realtime/app', { max_room_size: 2 })).status).toBe(200);
    const ana = await enter(customer, { room: 'pair', identity: 'ana', kind: 'call' });
    const bo = await enter(customer, { room: 'pair', identity: 'bo', kind: 'call' });
    const third = await mint(customer, { room: 'pair', identity: 'cy', kind: 'call' });

    expect(await joinFailure(third.url, third.token)).toMatch(/handshake|signal/i);
    await ana.publishAudio();
    await bo.waitForRemoteTrack('ana', 'audio');
    const present = await roomService().listParticipants(ana.room.name!);
    expect(present.map((participant) => participant.identity).sort()).toEqual(['ana', 'bo']);
  });
});
