/**
 * The spend guard with real LiveKit participants: a live account whose prepaid balance cannot pay
 * for the minutes its participants are running up is told why on the `svc.notice` topic and sent
 * out of the room, is billed for what it used (the balance goes below zero and shows what is owed),
 * can mint no more tokens, and is sent out again when it comes back with a token minted before.
 * Meanwhile an account that can pay stays in its room.
 */
import { DisconnectReason } from '@livekit/rtc-node';
import { describe, expect, it } from 'vitest';
import { SPEND_GUARD_EVERY_MS } from '../control-plane/src/modules/live/service.js';
import { useLiveSuite } from './support/live-suite.js';
import { type LiveParticipant, type RoomNotice, roomService } from './support/livekit.js';
import { api, type Customer, createCustomer } from './support/stack.js';

type StackCustomer = Awaited<ReturnType<typeof createCustomer>>;

interface LiveToken {
  url: string;
  token: string;
  room: string;
}

interface Balance {
  balance_micros: number;
  owed_micros: number;
}

interface UsageRow {
  product: string;
  metric: string;
  billable_quantity: number;
  cost_micros: number;
}

/** The contract a client app codes against: the topic and the reason it is sent away for. */
const NOTICE_TOPIC = 'svc.notice';
const BALANCE_EXHAUSTED = 'balance_exhausted';
/** The guard runs every 5 s: a removal may take a period, plus the join webhook and LiveKit's own work. */
const REMOVAL_WAIT_MS = 15_000;
/** A participant coming back while the account cannot pay is removed by the join webhook at once. */
const REJOIN_REMOVAL_WAIT_MS = 10_000;
/** Webhooks are asynchronous: how long the leave may take to be metered. */
const METERING_WAIT_MS = 15_000;
/** The account that can pay stays through two guard periods and then some. */
const CONTROL_STAY_MS = 2 * SPEND_GUARD_EVERY_MS + 1_000;
/** The publisher's declared quality, billed as live fhd minutes (it publishes nothing higher). */
const PRODUCT = 'live';
const METRIC = 'fhd_minutes';

const live = useLiveSuite();

async function mintResponse(customer: Customer, room: string, identity: string) {
  return api<LiveToken & { error?: { code?: string } }>(customer, 'POST', '/v1/realtime/live/tokens', {
    room,
    identity,
    kind: 'live',
    publish: true,
    quality: 'fhd',
  });
}

async function mint(customer: Customer, room: string, identity: string): Promise<LiveToken> {
  const response = await mintResponse(customer, room, identity);
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body;
}

/** Joins with a token; the participant leaves after the test whatever happens. */
const enter = (token: LiveToken) => live.join(token.url, token.token);

/** Uses up the account's free minutes of the metric, so every second of a session is priced. */
const useUpAllowance = (customer: StackCustomer) => live.priceBeyondAllowance(customer, PRODUCT, METRIC);

async function balance(customer: Customer): Promise<Balance> {
  const response = await api<Balance>(customer, 'GET', '/v1/realtime/balance');
  expect(response.status).toBe(200);
  return response.body;
}

/** Polls the balance until it is no longer `from`: the leave webhook has been metered. */
async function balanceAfterMetering(customer: Customer, from: number): Promise<Balance> {
  const deadline = Date.now() + METERING_WAIT_MS;
  for (;;) {
    const current = await balance(customer);
    if (current.balance_micros !== from) return current;
    if (Date.now() > deadline) {
      throw new Error(
        `the balance was still ${from} micros ${METERING_WAIT_MS} ms after the participant left`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/**
 * What a removed participant must have seen: the reason in its own `svc.notice` attribute (that update
 * travels on the signalling connection ahead of the removal), then PARTICIPANT_REMOVED. The same
 * reason may also come as a data message on the topic, which LiveKit can drop when the removal closes
 * the connection first, so it is checked only when it came. Nothing arrives after the disconnection,
 * so waiting for it is enough.
 */
async function expectRemovedForBalance(participant: LiveParticipant, timeoutMs: number): Promise<void> {
  await participant.waitForDisconnect(timeoutMs);
  const seen = participant.notices;
  const told = seen.findIndex((notice) => notice.type === 'attributes' && NOTICE_TOPIC in notice.changed);
  const gone = seen.findIndex((notice) => notice.type === 'disconnected');
  expect(told, `the notice before the disconnection, in ${JSON.stringify(seen)}`).toBeGreaterThanOrEqual(0);
  expect(told).toBeLessThan(gone);
  expect(seen[gone]).toEqual({ type: 'disconnected', reason: DisconnectReason.PARTICIPANT_REMOVED });
  const reason = (seen[told] as Extract<RoomNotice, { type: 'attributes' }>).changed[NOTICE_TOPIC]!;
  expect(JSON.parse(reason)).toEqual({ reason: BALANCE_EXHAUSTED, message: expect.stringMatching(/\S/) });
  for (const notice of seen) {
    if (notice.type === 'data')
      expect(notice).toEqual({ type: 'data', topic: NOTICE_TOPIC, payload: reason, from: undefined });
  }
}

/** The token the removed participant joined with, kept for the rejoin test once its account owes. */
let earlierToken: LiveToken | undefined;

describe('the spend guard on LiveKit', () => {
  it('removes the participant of a live account that cannot pay, bills it and refuses new tokens, while a funded account stays', async () => {
    const openingMicros = 1;
    const broke = await createCustomer(live.container, { mode: 'live', balanceMicros: openingMicros });
    const funded = await createCustomer(live.container, { mode: 'live', balanceMicros: 10_000_000 });
    const [price] = await Promise.all([useUpAllowance(broke), useUpAllowance(funded)]);
    const [brokeToken, fundedToken] = await Promise.all([
      mint(broke, 'stage', 'host'),
      mint(funded, 'lounge', 'host'),
    ]);

    const [host, control] = await Promise.all([enter(brokeToken), enter(fundedToken)]);
    await expectRemovedForBalance(host, REMOVAL_WAIT_MS);
    const removedAt = Date.now();

    // The funded account's participant, in the room as long as the other, stays through two guard periods.
    await new Promise((resolve) =>
      setTimeout(resolve, Math.max(0, control.joinedAt + CONTROL_STAY_MS - Date.now())),
    );
    expect(control.notices).toEqual([]);
    expect(control.room.isConnected).toBe(true);
    const present = await roomService().listParticipants(control.room.name!);
    expect(present.map((participant) => participant.identity)).toEqual(['host']);
    await control.leave();

    // The leave is metered in full: the balance goes below zero and shows what is owed.
    const after = await balanceAfterMetering(broke, openingMicros);
    expect(after.balance_micros, `${broke.account.id}: ${JSON.stringify(after)}`).toBeLessThan(0);
    expect(after.owed_micros).toBe(-after.balance_micros);
    const usage = await api<{ usage: UsageRow[]; total: { cost_micros: number } }>(
      broke,
      'GET',
      '/v1/realtime/usage?days=1',
    );
    expect(usage.status).toBe(200);
    const row = usage.body.usage.find((r) => r.product === PRODUCT && r.metric === METRIC);
    expect(row, JSON.stringify(usage.body.usage)).toBeDefined();
    // LiveKit counts from the join to the leave webhook's whole second; the control plane rounds up.
    const billedSeconds = Math.round(row!.billable_quantity * 60);
    expect(billedSeconds).toBeGreaterThanOrEqual(1);
    expect(billedSeconds).toBeLessThanOrEqual(Math.ceil((removedAt - host.joinedAt) / 1000) + 2);
    expect(row!.cost_micros).toBe(Math.floor((billedSeconds * price) / 60));
    expect(after.balance_micros).toBe(openingMicros - usage.body.total.cost_micros);

    const refused = await mintResponse(broke, 'stage', 'host');
    expect(refused.status).toBe(402);
    expect(refused.body.error?.code).toBe('PAYMENT_REQUIRED');
    earlierToken = brokeToken;
  });

  it('removes the participant again when it rejoins with the token minted before', async () => {
    if (!earlierToken) throw new Error('needs the previous test to have finished: its account must owe');
    const rejoined = await enter(earlierToken);
    await expectRemovedForBalance(rejoined, REJOIN_REMOVAL_WAIT_MS);
  });
});
