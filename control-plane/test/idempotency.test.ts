import { randomUUID } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import { type FragmentSqlToken, sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db } from '../src/db/transaction.js';
import { IDEMPOTENCY_LOCK_MS, IDEMPOTENCY_WINDOW_MS } from '../src/platform/idempotency.js';
import { route } from '../src/platform/route.js';
import { ledgerTotals } from './ledger.js';
import { createPricedProbeTable } from './priced-probe.js';
import { statementRecorder } from './statements.js';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

/** storage.uploads with no free allowance, so that every reservation costs its price. */
const UPLOAD_PRICE = 100;
/** writes.calls at its shipped price (no allowance). */
const WRITE_PRICE = 500;
const OPENING_BALANCE = 1_000_000;

/** Lets a request's handler go on once the test says so. */
function newGate() {
  let enter: () => void = () => {};
  let release: () => void = () => {};
  const entered = new Promise<void>((resolve) => {
    enter = resolve;
  });
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { entered, enter, released, release };
}

/**
 * A write whose handler, once its write is done, waits at the gate of the moment it started: a
 * request caught in the middle of its run. Priced, it writes in its charge's transaction; unpriced,
 * it writes and commits before it waits, as an unpriced operation's work does.
 */
function heldWrite(priced: boolean) {
  const gates = [newGate()];
  const write = async (db: Db, appId: string, note: string) =>
    String(
      await db.oneFirst(sql.unsafe`
        insert into test_priced_writes (app_id, note) values (${appId}, ${note}) returning id`),
    );
  const pass = async (id: string) => {
    const gate = gates.at(-1)!;
    gate.enter();
    await gate.released;
    return { id };
  };
  const common = {
    method: 'POST' as const,
    auth: 'secret-key' as const,
    tags: ['test'],
    hidden: true,
    body: Type.Object({ note: Type.String() }),
    response: Type.Object({ id: Type.String() }),
  };
  const declaration = priced
    ? route({
        ...common,
        operationId: 'test.idempotency.held',
        url: '/test/idempotency/held-write',
        summary: 'A priced write held until the test releases it',
        price: { product: 'writes', metric: 'calls' },
        handler: async ({ caller, body, tx }) => pass(await write(tx, caller.appId, body.note)),
      })
    : route({
        ...common,
        operationId: 'test.idempotency.heldUnpriced',
        url: '/test/idempotency/held-unpriced-write',
        summary: 'An unpriced write held until the test releases it',
        handler: async ({ caller, body }) => pass(await write(ctx.container.pool, caller.appId, body.note)),
      });
  return {
    declaration,
    /** The gate the next request waits at. */
    hold: () => {
      gates.push(newGate());
      return gates.at(-1)!;
    },
    releaseAll: () => {
      for (const gate of gates) gate.release();
    },
  };
}

/** Every statement sent to PostgreSQL, to hold the round trips of a keyed call. */
const { statements, interceptor: statementCounter } = statementRecorder();

const held = heldWrite(true);
const heldUnpriced = heldWrite(false);
let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp({
    settings: { SVC_FREE_ALLOWANCES: 'storage.uploads=0' },
    routes: () => [held.declaration, heldUnpriced.declaration],
    interceptors: [statementCounter],
  });
  await createPricedProbeTable(ctx.container);
});
afterAll(async () => {
  held.releaseAll();
  heldUnpriced.releaseAll();
  await ctx.close();
});

/** A POST as an integrator's server sends it, with an Idempotency-Key when one is given. */
function post(token: string, url: string, payload: object | undefined, key?: string) {
  return ctx.app.inject({
    method: 'POST',
    url,
    headers: { authorization: `Bearer ${token}`, ...(key === undefined ? {} : { 'idempotency-key': key }) },
    remoteAddress: uniqueAddress(),
    ...(payload ? { payload } : {}),
  });
}

const reserve = (token: string, payload: object, key?: string) =>
  post(token, '/v1/storage/uploads', payload, key);

const upload = (sizeBytes = 1) => ({ name: 'note.txt', content_type: 'text/plain', size_bytes: sizeBytes });

/** A key no other test uses. */
const newKey = () => `key-${randomUUID()}`;

const balanceOf = async (accountId: string) =>
  (await ctx.container.billing.getBalance(accountId)).balance_micros;

/** Rows of a table of one app. */
const rowsOf = (table: FragmentSqlToken, appId: string) =>
  ctx.container.pool.oneFirst(
    sql.type(
      z.object({ count: z.number() }),
    )`select count(*)::int as count from ${table} where app_id = ${appId}`,
  );

const objectsOf = (appId: string) => rowsOf(sql.fragment`storage_objects`, appId);
const keysOf = (appId: string) => rowsOf(sql.fragment`idempotency_keys`, appId);

const replayed = (response: { headers: Record<string, unknown> }) =>
  response.headers['idempotent-replayed'] === 'true';

describe('a priced POST sent again with the same Idempotency-Key', () => {
  it('answers the first status, body and cost, and is done and charged once', async () => {
    const { account, app, token } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: OPENING_BALANCE,
    });
    const key = newKey();
    const first = await reserve(token, upload(), key);
    expect(first.statusCode).toBe(201);
    expect(first.headers['x-svc-cost-usd']).toBe('0.000100');
    expect(replayed(first)).toBe(false);

    // The same body written in another order is the same request.
    const { size_bytes, content_type, name } = upload();
    const again = await reserve(token, { size_bytes, content_type, name }, key);
    expect(again.statusCode).toBe(201);
    expect(again.body).toBe(first.body);
    expect(again.headers['x-svc-cost-usd']).toBe('0.000100');
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
    expect(replayed(again)).toBe(true);

    expect(await objectsOf(app.id)).toBe(1);
    expect(await balanceOf(account.id)).toBe(OPENING_BALANCE - UPLOAD_PRICE);
    const totals = await ledgerTotals(ctx.container, account.id);
    expect(totals.ledger).toBe(totals.balance);
    expect(totals.usageLines).toBe(UPLOAD_PRICE);
  });

  it('with another body is a 422 naming the header, and does nothing', async () => {
    const { account, app, token } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: OPENING_BALANCE,
    });
    const key = newKey();
    expect((await reserve(token, upload(1), key)).statusCode).toBe(201);
    const other = await reserve(token, upload(2), key);
    expect(other.statusCode).toBe(422);
    expect(other.json().error).toMatchObject({
      type: 'invalid_request',
      code: 'IDEMPOTENCY_KEY_REUSED',
      fields: [{ in: 'header', field: 'idempotency-key', message: 'was used for another request' }],
    });
    expect(other.json().error.message).toMatch(/Idempotency-Key was used for another request/);
    expect(other.headers['x-svc-cost-usd']).toBe('0.000000');
    // Another operation with the same key is another request too.
    expect((await post(token, '/v1/realtime/chat/tokens', { user_id: 'ana' }, key)).statusCode).toBe(422);
    expect(await objectsOf(app.id)).toBe(1);
    expect(await balanceOf(account.id)).toBe(OPENING_BALANCE - UPLOAD_PRICE);
  });

  it('is another request in another app or key mode', async () => {
    const first = await createCustomer(ctx.container, { mode: 'live', balanceMicros: OPENING_BALANCE });
    const second = await createCustomer(ctx.container, { mode: 'live', balanceMicros: OPENING_BALANCE });
    const { token: firstAppTestToken } = await ctx.container.accounts.createKey({
      appId: first.app.id,
      kind: 'secret',
      mode: 'test',
    });
    const key = newKey();
    const answers = [
      await reserve(first.token, upload(), key),
      await reserve(second.token, upload(), key),
      await reserve(firstAppTestToken, upload(), key),
    ];
    expect(answers.map((answer) => [answer.statusCode, replayed(answer)])).toEqual([
      [201, false],
      [201, false],
      [201, false],
    ]);
    expect(new Set(answers.map((answer) => answer.json().object.id)).size).toBe(3);
    expect(await balanceOf(first.account.id)).toBe(OPENING_BALANCE - UPLOAD_PRICE);
    expect(await balanceOf(second.account.id)).toBe(OPENING_BALANCE - UPLOAD_PRICE);
    // Within its own app and mode the key still answers the first response.
    const again = await reserve(first.token, upload(), key);
    expect(replayed(again)).toBe(true);
    expect(again.body).toBe(answers[0]!.body);
  });

  it('while the first still runs is a 409 to retry, and the retry gets the first answer', async () => {
    const { account, app, token } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: OPENING_BALANCE,
    });
    const key = newKey();
    const gate = held.hold();
    const running = post(token, '/test/idempotency/held-write', { note: 'once' }, key);
    await gate.entered;

    const meanwhile = await post(token, '/test/idempotency/held-write', { note: 'once' }, key);
    expect(meanwhile.statusCode).toBe(409);
    expect(meanwhile.json().error).toMatchObject({ type: 'conflict', code: 'IDEMPOTENCY_KEY_IN_USE' });
    expect(meanwhile.headers['retry-after']).toBe('1');
    expect(meanwhile.headers['x-svc-cost-usd']).toBe('0.000000');

    gate.release();
    const first = await running;
    expect(first.statusCode).toBe(200);
    expect(first.headers['x-svc-cost-usd']).toBe('0.000500');
    const retry = await post(token, '/test/idempotency/held-write', { note: 'once' }, key);
    expect(retry.statusCode).toBe(200);
    expect(retry.body).toBe(first.body);
    expect(retry.headers['x-svc-cost-usd']).toBe('0.000500');
    expect(replayed(retry)).toBe(true);

    expect(await rowsOf(sql.fragment`test_priced_writes`, app.id)).toBe(1);
    expect(await balanceOf(account.id)).toBe(OPENING_BALANCE - WRITE_PRICE);
  });

  it('whose run outlives its lock loses the key: only the run that took it over is kept and charged', async () => {
    const { account, app, token } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: OPENING_BALANCE,
    });
    const key = newKey();
    const send = () => post(token, '/test/idempotency/held-write', { note: 'slow' }, key);
    const start = ctx.clock.now();
    try {
      const slowGate = held.hold();
      const slow = send();
      await slowGate.entered;
      // As if the first run's process had died: past its lock, the key goes to the next attempt.
      ctx.clock.advance(IDEMPOTENCY_LOCK_MS + 1_000);
      const takeoverGate = held.hold();
      const takeover = send();
      await takeoverGate.entered;

      slowGate.release();
      const lost = await slow;
      expect(lost.statusCode).toBe(409);
      expect(lost.json().error.code).toBe('IDEMPOTENCY_KEY_IN_USE');
      expect(lost.headers['x-svc-cost-usd']).toBe('0.000000');
      takeoverGate.release();
      const kept = await takeover;
      expect([kept.statusCode, kept.headers['x-svc-cost-usd']]).toEqual([200, '0.000500']);

      const retry = await send();
      expect([retry.statusCode, retry.body, replayed(retry)]).toEqual([200, kept.body, true]);
      expect(await rowsOf(sql.fragment`test_priced_writes`, app.id)).toBe(1);
      expect(await balanceOf(account.id)).toBe(OPENING_BALANCE - WRITE_PRICE);
    } finally {
      ctx.clock.set(start);
    }
  });

  it('whose process is gone is taken over at once; one whose process beats is not', async () => {
    const { account, app, token } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: OPENING_BALANCE,
    });
    const key = newKey();
    const send = () => post(token, '/test/idempotency/held-write', { note: 'replica' }, key);
    /** As if another replica held the key: its claim names that replica's instance. */
    const heldBy = (instance: string) =>
      ctx.container.pool.query(sql.unsafe`
        update idempotency_keys set claim = ${instance} || substr(claim, strpos(claim, '.'))
        where app_id = ${app.id} and key = ${key}`);
    const slowGate = held.hold();
    const slow = send();
    await slowGate.entered;

    // A replica whose heartbeat is in Redis is running the key: wait for it.
    const alive = `alive${randomUUID().slice(0, 8)}`;
    await ctx.container.redis.set(`svc:instance:${alive}`, '1', 'PX', 10_000);
    await heldBy(alive);
    expect((await send()).statusCode).toBe(409);

    // Killed: no heartbeat. The next attempt takes the key without waiting for its lock.
    await heldBy(`gone${randomUUID().slice(0, 8)}`);
    const takeoverGate = held.hold();
    const takeover = send();
    await takeoverGate.entered;
    slowGate.release();
    expect((await slow).statusCode).toBe(409);
    takeoverGate.release();
    const kept = await takeover;
    expect([kept.statusCode, kept.headers['x-svc-cost-usd']]).toEqual([200, '0.000500']);
    expect(await rowsOf(sql.fragment`test_priced_writes`, app.id)).toBe(1);
    expect(await balanceOf(account.id)).toBe(OPENING_BALANCE - WRITE_PRICE);
  });

  it('many times at once runs once: the others get 409 or the first answer', async () => {
    const { account, app, token } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: OPENING_BALANCE,
    });
    const key = newKey();
    const answers = await Promise.all(Array.from({ length: 20 }, () => reserve(token, upload(), key)));
    const ran = answers.filter((answer) => answer.statusCode === 201 && !replayed(answer));
    expect(ran).toHaveLength(1);
    for (const answer of answers) {
      if (answer === ran[0]) continue;
      if (answer.statusCode === 409) expect(answer.json().error.code).toBe('IDEMPOTENCY_KEY_IN_USE');
      else expect([answer.statusCode, replayed(answer), answer.body]).toEqual([201, true, ran[0]!.body]);
    }
    expect(await objectsOf(app.id)).toBe(1);
    expect(await balanceOf(account.id)).toBe(OPENING_BALANCE - UPLOAD_PRICE);
  });

  it('is not kept when the balance could not pay it: after a top-up the same key runs', async () => {
    // Funded, so admitted, but short of the price: refused by the charge, after the key was claimed.
    const short = UPLOAD_PRICE / 2;
    const { account, app, token } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: short,
    });
    const key = newKey();
    expect((await reserve(token, upload(), key)).statusCode).toBe(402);
    expect(await keysOf(app.id)).toBe(0);
    await ctx.container.billing.topUp({
      accountId: account.id,
      amountMicros: OPENING_BALANCE,
      reference: 'later',
    });
    const paid = await reserve(token, upload(), key);
    expect([paid.statusCode, replayed(paid)]).toEqual([201, false]);
    expect(await objectsOf(app.id)).toBe(1);
    expect(await balanceOf(account.id)).toBe(short + OPENING_BALANCE - UPLOAD_PRICE);
  });
});

describe('the round trips of a keyed POST', () => {
  it('are one claim, then the answer kept inside the transaction of its charge; a replay is the claim', async () => {
    const { token } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: OPENING_BALANCE });
    const key = newKey();
    expect((await reserve(token, upload())).statusCode).toBe(201);
    statements.length = 0;
    expect((await reserve(token, upload(), key)).statusCode).toBe(201);
    expect(statements).toEqual([
      expect.stringMatching(/ from svc_idempotency_claim\(/),
      'begin',
      expect.stringMatching(/^insert into storage_objects /),
      expect.stringMatching(/^update idempotency_keys /),
      expect.stringMatching(/^insert into charges_at_commit /),
      'commit',
    ]);
    statements.length = 0;
    expect(replayed(await reserve(token, upload(), key))).toBe(true);
    expect(statements).toEqual([expect.stringMatching(/ from svc_idempotency_claim\(/)]);
  });
});

describe('an unpriced POST sent again with the same Idempotency-Key', () => {
  it('whose process lost its heartbeat is not taken over: that process may only have stalled', async () => {
    const { app, token } = await createCustomer(ctx.container);
    const key = newKey();
    const send = () => post(token, '/test/idempotency/held-unpriced-write', { note: 'stalled' }, key);
    const gate = heldUnpriced.hold();
    const first = send();
    await gate.entered;
    // Its claim names a process whose heartbeat lapsed; its write is committed all the same.
    await ctx.container.pool.query(sql.unsafe`
      update idempotency_keys set claim = ${`stalled${randomUUID().slice(0, 8)}`} || substr(claim, strpos(claim, '.'))
      where app_id = ${app.id} and key = ${key}`);
    // Taken over, it would run and wait at a gate of its own: say so rather than time out.
    heldUnpriced.hold();
    const second = await Promise.race([
      send().then((response) => response.statusCode),
      new Promise((resolve) => setTimeout(() => resolve('taken over and run'), 3_000)),
    ]);
    expect(second).toBe(409);
    gate.release();
    await first;
    expect(await rowsOf(sql.fragment`test_priced_writes`, app.id)).toBe(1);
  });

  it('answers the first credential, and counts toward the daily cap like any request', async () => {
    const { token } = await createCustomer(ctx.container);
    const key = newKey();
    const first = await post(token, '/v1/realtime/chat/tokens', { user_id: 'ana' }, key);
    expect(first.statusCode).toBe(200);
    const again = await post(token, '/v1/realtime/chat/tokens', { user_id: 'ana' }, key);
    expect(again.statusCode).toBe(200);
    expect(again.body).toBe(first.body);
    expect(replayed(again)).toBe(true);
    expect(Number(again.headers['ratelimit-remaining'])).toBe(
      Number(first.headers['ratelimit-remaining']) - 1,
    );
    // The kept answer holds the password sealed, never in the clear.
    const kept = await ctx.container.pool.oneFirst(
      sql.unsafe`select body from idempotency_keys where key = ${key}`,
    );
    expect(String(kept)).not.toContain(first.json().password);
    expect(String(kept)).not.toContain('ana');
    // Without the key it is a new credential (each has a password of its own).
    const fresh = await post(token, '/v1/realtime/chat/tokens', { user_id: 'ana' });
    expect(fresh.json().password).not.toBe(first.json().password);
  });

  it('that found nothing answers the same 404 again', async () => {
    const { token } = await createCustomer(ctx.container);
    const key = newKey();
    const url = '/v1/storage/objects/obj_missing/complete';
    const first = await post(token, url, undefined, key);
    expect(first.statusCode).toBe(404);
    const again = await post(token, url, undefined, key);
    expect([again.statusCode, again.body, replayed(again)]).toEqual([404, first.body, true]);
  });
});

describe('an Idempotency-Key', () => {
  it.each([
    ['longer than 255 characters', 'k'.repeat(256)],
    ['with a character outside printable ASCII', 'clé-1'],
  ])('%s is a 422 naming the header, before anything runs', async (_case, key) => {
    const { app, token } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: OPENING_BALANCE,
    });
    const refused = await reserve(token, upload(), key);
    expect(refused.statusCode).toBe(422);
    expect(refused.json().error.fields).toEqual([
      expect.objectContaining({ in: 'header', field: 'idempotency-key' }),
    ]);
    expect(await objectsOf(app.id)).toBe(0);
    expect(await keysOf(app.id)).toBe(0);
  });

  it('of 255 printable characters is taken', async () => {
    const { token } = await createCustomer(ctx.container);
    const key = `${newKey()} ~!"#$%&'()*+,-./:;<=>?@[]^_\`{|}`.padEnd(255, 'x');
    expect((await reserve(token, upload(), key)).statusCode).toBe(201);
    expect(replayed(await reserve(token, upload(), key))).toBe(true);
  });

  it('runs again after 24 hours, and its row is pruned', async () => {
    const { account, app, token } = await createCustomer(ctx.container, {
      mode: 'live',
      balanceMicros: OPENING_BALANCE,
    });
    const [pruned, kept] = [newKey(), newKey()];
    const start = ctx.clock.now();
    try {
      expect((await reserve(token, upload(), pruned)).statusCode).toBe(201);
      expect((await reserve(token, upload(), kept)).statusCode).toBe(201);
      ctx.clock.advance(IDEMPOTENCY_WINDOW_MS - 1_000);
      expect(replayed(await reserve(token, upload(), kept))).toBe(true);

      ctx.clock.advance(2_000);
      // Past its window a key runs again even before the pruning comes by…
      const rerun = await reserve(token, upload(), kept);
      expect([rerun.statusCode, replayed(rerun)]).toEqual([201, false]);
      // …which removes the keys past their window.
      expect((await ctx.container.idempotency.prune()).pruned).toBeGreaterThanOrEqual(1);
      expect(await keysOf(app.id)).toBe(1);
      const afterPruning = await reserve(token, upload(), pruned);
      expect([afterPruning.statusCode, replayed(afterPruning)]).toEqual([201, false]);

      expect(await objectsOf(app.id)).toBe(4);
      expect(await balanceOf(account.id)).toBe(OPENING_BALANCE - 4 * UPLOAD_PRICE);
    } finally {
      ctx.clock.set(start);
    }
  });
});

describe('the OpenAPI document', () => {
  it('declares Idempotency-Key and its 409 on every POST of a secret key or a user token, and on nothing else', async () => {
    const document = (await ctx.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json();
    interface Operation {
      security?: Record<string, unknown>[];
      parameters?: { in: string; name: string }[];
      responses: Record<string, { description: string }>;
    }
    const operations = Object.entries(document.paths as Record<string, Record<string, Operation>>).flatMap(
      ([path, methods]) =>
        Object.entries(methods).map(([method, operation]) => ({ path, method, operation })),
    );
    const takesKey = ({ operation }: { operation: Operation }) =>
      (operation.parameters ?? []).some(
        (p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key',
      );
    const secretPosts = operations.filter(
      ({ method, operation }) =>
        method === 'post' &&
        (operation.security ?? []).some((scheme) => 'bearerKey' in scheme || 'userToken' in scheme),
    );
    expect(secretPosts.map(({ path }) => path)).toEqual(
      expect.arrayContaining([
        '/v1/storage/uploads',
        '/v1/realtime/chat/tokens',
        '/v1/realtime/live/tokens',
        '/v1/me/buzzes',
      ]),
    );
    for (const post of secretPosts) {
      expect({ path: post.path, takesKey: takesKey(post) }).toEqual({ path: post.path, takesKey: true });
      expect(post.operation.responses['409']?.description).toMatch(/Idempotency-Key is in progress/);
    }
    const others = operations.filter((operation) => !secretPosts.includes(operation));
    expect(others.filter(takesKey).map(({ path, method }) => `${method} ${path}`)).toEqual([]);
  });
});
