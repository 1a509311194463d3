import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { disposeLiveKit, join } from '../../../e2e/support/livekit.js';
import { api, reserveKeyedUpload } from '../../../e2e/support/stack.js';
import { type ChatCredential, loginFailure } from '../../../e2e/support/xmpp.js';
import { forEachConcurrently } from '../../../infra/src/concurrency.js';
import { stackPaths } from '../../../infra/src/paths.js';
import { readRunRecord } from '../../../infra/src/run-records.js';
import { loadSettings } from '../../src/config/load.js';
import { type Container, createContainer } from '../../src/container.js';
import { RECONCILE_GRACE_MS } from '../../src/modules/live/service.js';
import { createManualClock } from '../../src/platform/clock.js';
import { IDEMPOTENCY_LOCK_MS } from '../../src/platform/idempotency.js';
import { inTransaction } from '../../src/platform/transaction.js';
import { ledgerTotals, liveSessionsOf, storageObjectCount, usedQuantity } from '../ledger.js';
import { createCustomer } from '../support.js';
import { untilDone as retryUntilDone } from '../until-done.js';
import { type Receiver, startReceiver } from '../webhook-receiver.js';
import { stackServer } from './stack-servers.js';

// The test stack's control plane gets SIGKILL while priced calls, chat logins, LiveKit webhooks,
// uploads and webhook deliveries are in flight, and is started again. Nothing may be lost or doubled.

const BASE = loadSettings(process.env).SVC_PUBLIC_URL;
const PRICED_CALLS = 1_000;
const CHAT_LOGINS = 200;
const WEBHOOK_EVENTS = 200;
const LIVE_PARTICIPANTS = 2;
const UPLOADED = 40;
const CONCURRENCY = 16;
/**
 * How long any one piece of work keeps retrying through the outage: a priced call whose key the
 * killed process had claimed answers 409 (Retry-After: 1) until that claim's lock lapses.
 */
const SETTLE_MS = IDEMPOTENCY_LOCK_MS + 30_000;

const clock = createManualClock(new Date());
let container: Container;
let hook: Receiver;

beforeAll(async () => {
  container = await createContainer(loadSettings(process.env), { clock });
  // Each delivery is held a moment, so that some are in flight when the process dies.
  hook = await startReceiver(() => ({ status: 200, delayMs: 200 }));
});
afterAll(async () => {
  await hook.close();
  await container.close();
  await disposeLiveKit();
});

async function killControlPlane(): Promise<void> {
  process.kill(readRunRecord(stackPaths('test').runDir, 'control-plane')!.pid, 'SIGKILL');
  while (
    await fetch(`${BASE}/healthz`).then(
      () => true,
      () => false,
    )
  )
    await sleep(20);
}

/** Retries through the outage until it answers, for at most SETTLE_MS. */
function untilDone<T>(what: string, attempt: () => Promise<T | undefined>) {
  return retryUntilDone(what, attempt, SETTLE_MS);
}

describe('the control plane killed with SIGKILL under load', () => {
  it('loses and doubles nothing: ledger, charges, deliveries, live sessions and chat logins', async () => {
    const customer = await createCustomer(container, { mode: 'live', balanceMicros: 100_000_000 });
    const account = customer.account.id;
    const appId = customer.app.id;

    // Before: chat credentials, a webhook endpoint, participants in a call room.
    const credentials: ChatCredential[] = [];
    await forEachConcurrently(
      Array.from({ length: CHAT_LOGINS }, (_, i) => i),
      CONCURRENCY,
      async (i) => {
        const minted = await api(customer, 'POST', '/v1/realtime/chat/tokens', { user_id: `kill-${i}` });
        expect(minted.status).toBe(200);
        credentials.push(minted.body as unknown as ChatCredential);
      },
    );
    // Through the service, in test mode: only test endpoints may be plain http on loopback.
    await container.webhooks.create(
      { appId, mode: 'test' },
      { url: hook.url, event_types: ['buzz.created'] },
    );
    const participants = await Promise.all(
      Array.from({ length: LIVE_PARTICIPANTS }, async (_, i) => {
        const minted = await api(customer, 'POST', '/v1/realtime/live/tokens', {
          room: 'crash',
          identity: `caller-${i}`,
          kind: 'call',
        });
        return join(minted.body.url as string, minted.body.token as string);
      }),
    );
    const liveSessions = () => liveSessionsOf(container, account);
    while ((await liveSessions()).length < LIVE_PARTICIPANTS) await sleep(100);

    // The load: every priced call with its own Idempotency-Key, retried with it until it answers.
    const keys = Array.from({ length: PRICED_CALLS }, () => randomUUID());
    const uploaded: string[] = [];
    let pricedRetries = 0;
    const pricedCalls = forEachConcurrently(keys, CONCURRENCY, async (key) => {
      const { result, tries } = await untilDone(`priced call ${key}`, async () => {
        const answer = await reserveKeyedUpload(customer, key, 'crash.txt');
        if (answer.status === 200 || answer.status === 201) return answer.body;
        if (answer.status >= 500 || answer.status === 409) return undefined;
        throw new Error(`priced call answered ${answer.status}: ${JSON.stringify(answer.body)}`);
      });
      pricedRetries += tries - 1;
      // Some of them upload their bytes straight to MinIO and complete through the control plane.
      if (uploaded.length >= UPLOADED) return;
      const object = result.object as { id: string };
      uploaded.push(object.id);
      const put = await fetch(result.upload_url as string, {
        method: 'PUT',
        headers: result.upload_headers as Record<string, string>,
        body: 'bytes',
      });
      expect(put.status).toBe(200);
      await untilDone(`completing ${object.id}`, async () => {
        const answer = await api(customer, 'POST', `/v1/storage/objects/${object.id}/complete`);
        return answer.status === 200 ? answer : undefined;
      });
    });
    const events = inTransaction(container.pool, async (tx) => {
      for (let n = 0; n < WEBHOOK_EVENTS; n += 1)
        await container.outbox.emit(tx, { appId, mode: 'test', type: 'buzz.created', data: { n } });
    });
    // A quarter of the logins before the kill, the rest from the moment it dies: those are refused
    // until it is back, however fast the work before the kill went.
    let killed = () => {};
    const outage = new Promise<void>((resolve) => {
      killed = resolve;
    });
    let refusedLogins = 0;
    const chatLogins = forEachConcurrently(credentials.entries(), CONCURRENCY, async ([i, credential]) => {
      if (i >= CHAT_LOGINS / 4) await outage;
      const { tries } = await untilDone(`chat login of ${credential.user}`, async () =>
        (await loginFailure(credential)) === null ? true : undefined,
      );
      if (tries > 1) refusedLogins += 1;
    });

    // Mid-way through, the process dies; the participants leave while it is down.
    while (hook.received.length < 20) await sleep(20);
    await killControlPlane();
    killed();
    await Promise.all(participants.map((participant) => participant.leave()));
    await sleep(2_000);
    await stackServer('up', 'control-plane');
    await Promise.all([pricedCalls, events, chatLogins]);

    // Chat logins refused during the outage succeeded afterwards, ejabberd never restarted.
    console.log(
      `killed mid-load: ${pricedRetries} priced-call retries, ${refusedLogins} chat logins refused then accepted`,
    );
    expect(refusedLogins).toBeGreaterThan(0);

    // Every outbox event reached the receiver at least once.
    const received = async () =>
      new Set(
        hook.received.map((request) => JSON.parse(request.body).data?.n).filter((n) => n !== undefined),
      );
    const deadline = Date.now() + SETTLE_MS;
    while ((await received()).size < WEBHOOK_EVENTS && Date.now() < deadline) await sleep(250);
    expect((await received()).size).toBe(WEBHOOK_EVENTS);

    // Each live session is closed once: by LiveKit's retried leave webhook, or else by the reconciler
    // (a pass notes it missing, one a grace later closes it: each pass here is a grace after the last).
    clock.set(new Date(Date.now()));
    await untilDone('live sessions closed', async () => {
      if ((await liveSessions()).every((session) => session.left_at !== null)) return true;
      clock.advance(RECONCILE_GRACE_MS + 1_000);
      await container.live.reconcile();
      return undefined;
    });
    const sessions = await liveSessions();
    expect(sessions.map((session) => session.identity)).toEqual(['caller-0', 'caller-1']);

    // Every priced call that answered is charged exactly once: one upload row and one unit of usage
    // each, and the balance is the sum of the ledger.
    expect(await storageObjectCount(container, appId)).toBe(PRICED_CALLS);
    await untilDone('usage flushed', async () =>
      (await usedQuantity(container, appId, 'storage', 'uploads')) === PRICED_CALLS ? true : undefined,
    );
    const calls = await usedQuantity(container, appId, 'calls');
    expect(calls).toBe(sessions.reduce((sum, session) => sum + (session.billed_seconds ?? 0), 0));
    const totals = await ledgerTotals(container, account);
    expect(totals.balance).toBe(totals.ledger);
    expect(totals.usageCost).toBe(totals.usageLines);
  }, 300_000);
});
