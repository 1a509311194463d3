/**
 * Real WebRTC participants (@livekit/rtc-node) in the bundled LiveKit with tokens minted by the
 * running control plane: what each kind of token may do, the room limit, and the minutes the
 * control plane meters from LiveKit's webhooks once the participants have left.
 */
import { TrackSource } from 'livekit-server-sdk';
import { describe, expect, it } from 'vitest';
import { useLiveSuite } from './support/live-suite.js';
import { joinFailure, type LiveParticipant, roomService } from './support/livekit.js';
import { api, type Customer, createCustomer, stackSettings } from './support/stack.js';

interface LiveToken {
  url: string;
  token: string;
  room: string;
  expires_in: number;
}

interface TokenRequest {
  room: string;
  identity: string;
  kind?: 'live' | 'call' | 'audio';
  publish?: boolean;
  quality?: 'hd' | 'fhd' | '4k';
}

/** The fields of a usage row these tests read: billable_quantity is in minutes past the allowance. */
interface UsageRow {
  product: string;
  metric: string;
  billable_quantity: number;
  cost_micros: number;
}

/** How long each session stays in the room: long enough to be metered, short enough to keep the suite quick. */
const SESSION_MS = 3_000;
/** Webhooks are asynchronous: how long usage may take to show a session. */
const METERING_WAIT_MS = 15_000;

const live = useLiveSuite();

async function mint(customer: Customer, request: TokenRequest): Promise<LiveToken> {
  const response = await api<LiveToken>(customer, 'POST', '/v1/realtime/live/tokens', request);
  expect(response.status).toBe(200);
  return response.body;
}

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

/**
 * The seconds the control plane may bill for these participants. LiveKit counts from when a
 * participant became active (just before its join resolves here) to its leave webhook's createdAt,
 * which is in whole seconds, and the control plane rounds each session up to the second.
 */
function billableRange(present: LiveParticipant[]) {
  const seconds = present.map((participant) => (participant.leftAt! - participant.joinedAt) / 1000);
  const total = seconds.reduce((sum, s) => sum + s, 0);
  return { low: Math.max(1, total - present.length), high: total + 2 * present.length };
}

async function usageReport(customer: Customer) {
  const report = await api<{ usage: UsageRow[]; total: { cost_micros: number } }>(
    customer,
    'GET',
    '/v1/realtime/usage?days=1',
  );
  expect(report.status).toBe(200);
  return report.body;
}

const billedSeconds = (row: UsageRow | undefined) => Math.round((row?.billable_quantity ?? 0) * 60);

/**
 * Polls the usage report until the metric's row bills at least `low` seconds and then holds still
 * for a poll: each participant's leave is a webhook of its own, metered when it arrives.
 */
async function settledUsage(customer: Customer, product: string, metric: string, low: number) {
  const deadline = Date.now() + METERING_WAIT_MS;
  let previous: number | undefined;
  for (;;) {
    const report = await usageReport(customer);
    const row = report.usage.find((r) => r.product === product && r.metric === metric);
    const seconds = billedSeconds(row);
    if ((seconds >= low && seconds === previous) || Date.now() > deadline) return { row, seconds, report };
    previous = seconds >= low ? seconds : undefined;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** The metric's row bills the participants' presence at its price: floor(seconds × price / 60). */
async function expectBilled(
  customer: Customer,
  product: string,
  metric: string,
  priceMicros: number,
  present: LiveParticipant[],
) {
  const expected = billableRange(present);
  const billed = await settledUsage(customer, product, metric, expected.low);
  expect(billed.seconds).toBeGreaterThanOrEqual(expected.low);
  expect(billed.seconds).toBeLessThanOrEqual(expected.high);
  expect(billed.row!.cost_micros).toBe(Math.floor((billed.seconds * priceMicros) / 60));
  return billed;
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
