import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChatSession, connect } from '../../e2e/support/xmpp.js';
import { createPricedProbeTable, pricedProbe } from './priced-probe.js';
import { statementRecorder } from './statements.js';
import { callWithKey, createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

/**
 * What each hot path sends to PostgreSQL and Redis once the caches are warm, held so that it cannot
 * creep up: a priced call that writes is its work and one charge row in one transaction (charged in
 * its COMMIT), one that writes nothing is one charge statement, a mint or a login is one Redis round
 * trip and no PostgreSQL at all.
 */
const { statements, interceptor: counter } = statementRecorder();

let ctx: TestContext;
let redisCommands: string[] = [];
const sessions: ChatSession[] = [];
beforeAll(async () => {
  ctx = await startTestApp({ interceptors: [counter], routes: () => pricedProbe() });
  await createPricedProbeTable(ctx.container);
  const redis = ctx.container.redis;
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = (command, ...rest) => {
    // The process's heartbeat beats every second, whatever a call does (platform/liveness.ts).
    const heartbeat = command.name === 'set' && String(command.args[0]).startsWith('svc:instance:');
    if (!heartbeat) redisCommands.push(command.name);
    return send(command, ...rest);
  };
});
afterAll(async () => {
  await Promise.all(sessions.map((session) => session.stop()));
  await ctx.close();
});

/** Runs a call twice (the first warms the caches) and returns what the second one sent. */
async function sentBy(call: () => Promise<{ statusCode: number }>, expectedStatus = 200) {
  expect((await call()).statusCode).toBe(expectedStatus);
  statements.length = 0;
  redisCommands = [];
  expect((await call()).statusCode).toBe(expectedStatus);
  return { statements: [...statements], redis: [...redisCommands] };
}

const keyed = (token: string, method: 'GET' | 'POST', url: string, payload?: object) => () =>
  callWithKey(ctx.app, token, method, url, payload);

describe('round trips', () => {
  it('of a priced call: the work and its charge in one transaction, admission in one Redis script', async () => {
    const { token } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const sent = await sentBy(keyed(token, 'POST', '/test/priced'));
    expect(sent.statements).toEqual([
      'begin',
      expect.stringMatching(/^insert into test_priced_writes/),
      expect.stringMatching(/^insert into charges_at_commit/),
      'commit',
    ]);
    expect(sent.redis).toEqual(['evalsha']);
  });

  it('of an upload reservation and a signed read URL with a live key', async () => {
    const { token } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const upload = { name: 'a.txt', content_type: 'text/plain', size_bytes: 1 };
    const reserved = await sentBy(keyed(token, 'POST', '/v1/storage/uploads', upload), 201);
    expect(reserved.statements.map((s) => s.slice(0, 30))).toEqual([
      'begin',
      'insert into storage_objects (i',
      'insert into charges_at_commit ',
      'commit',
    ]);
    const object = (await keyed(token, 'POST', '/v1/storage/uploads', upload)()).json();
    const headers = { 'content-type': 'text/plain', 'if-none-match': '*' };
    expect((await fetch(object.upload_url, { method: 'PUT', headers, body: 'x' })).status).toBe(200);
    await keyed(token, 'POST', `/v1/storage/objects/${object.object.id}/complete`)();
    const read = await sentBy(keyed(token, 'GET', `/v1/storage/objects/${object.object.id}`));
    // The object's row, then the charge alone: nothing written, so no transaction around them.
    expect(read.statements).toHaveLength(2);
    expect(read.statements[0]).toMatch(/^select .* from storage_objects/);
    expect(read.statements[1]).toMatch(/from svc_meter\(/);
    // Admission only: the read's bandwidth is counted in process and handed to Redis by the flush.
    expect(read.redis).toEqual(['evalsha']);
  });

  /**
   * What 16 calls at once of one live account send, once a first call warmed the caches; the call `i`
   * goes to `urlOf(i)` and answers `statusOf(i)`.
   */
  async function sentAtOnce(
    method: 'GET' | 'POST',
    urlOf: (i: number) => string,
    statusOf: (i: number) => number = () => 200,
  ) {
    const { token } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    await keyed(token, method, urlOf(-1))();
    statements.length = 0;
    const responses = await Promise.all(
      Array.from({ length: 16 }, (_, i) => keyed(token, method, urlOf(i))()),
    );
    expect(responses.map((response) => response.statusCode)).toEqual(
      Array.from({ length: 16 }, (_, i) => statusOf(i)),
    );
    return (pattern: RegExp) => statements.filter((text) => pattern.test(text)).length;
  }

  it('of priced calls that write nothing, at once on one account: fewer charges than calls', async () => {
    const sent = await sentAtOnce('GET', () => '/test/priced-read');
    expect(sent(/from svc_meter\(/)).toBeGreaterThan(0);
    expect(sent(/from svc_meter\(/)).toBeLessThan(16);
  });

  it('of priced writes taken in turns, at once on one account: fewer transactions than calls', async () => {
    const sent = await sentAtOnce('POST', () => '/test/priced-together');
    expect(sent(/^insert into test_priced_writes/)).toBe(16);
    expect(sent(/^commit$/)).toBeGreaterThan(0);
    expect(sent(/^commit$/)).toBeLessThan(16);
    expect(sent(/^insert into charges_at_commit/)).toBe(sent(/^commit$/));
  });

  it('of a turn of priced writes in which some fail before writing: the others commit, none runs again', async () => {
    ctx.app.log.level = 'silent';
    const failing = (i: number) => i % 4 === 3;
    const sent = await sentAtOnce(
      'POST',
      (i) => `/test/priced-together${failing(i) ? '?fail=before-work' : ''}`,
      (i) => (failing(i) ? 500 : 200),
    );
    expect(sent(/^insert into test_priced_writes/)).toBe(12);
  });

  it('of publishes at once on one live key, by several users: in turns, a refused one not rerunning its turn', async () => {
    const { token } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const users = await Promise.all(
      Array.from({ length: 8 }, async (_, i) => {
        const minted = await keyed(token, 'POST', `/v1/users/turn-${i}/tokens`, {})();
        const user = minted.json().token as string;
        const profile = { username: `turn_${randomBytes(4).toString('hex')}` };
        expect((await callWithKey(ctx.app, user, 'PUT', '/v1/me/profile', profile)).statusCode).toBe(200);
        return user;
      }),
    );
    const withoutProfile = (await keyed(token, 'POST', '/v1/users/turn-none/tokens', {})()).json().token;
    statements.length = 0;
    const responses = await Promise.all([
      ...Array.from({ length: 16 }, (_, i) =>
        keyed(users[i % 8]!, 'POST', '/v1/me/buzzes', { text: `${i}` })(),
      ),
      ...Array.from({ length: 2 }, () => keyed(withoutProfile, 'POST', '/v1/me/buzzes', { text: 'x' })()),
    ]);
    expect(responses.map((response) => response.statusCode)).toEqual([...Array(16).fill(200), 409, 409]);
    const sent = (pattern: RegExp) => statements.filter((text) => pattern.test(text)).length;
    // Each publish once: a 409 wrote nothing, so its turn was not run again alone.
    expect(sent(/^with author as/)).toBe(18);
    // Each with its event: none has a statement of its own.
    expect(sent(/outbox_endpoints/)).toBe(18);
    expect(sent(/^with outbox_endpoints/)).toBe(0);
    expect(sent(/^commit$/)).toBeGreaterThan(0);
    expect(sent(/^commit$/)).toBeLessThan(16);
  });

  it('of a reaction and of a comment: the write, its count and its event in one statement', async () => {
    const { token } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const user = (await keyed(token, 'POST', '/v1/users/reacting/tokens', {})()).json().token as string;
    const profile = { username: `reacting_${randomBytes(4).toString('hex')}` };
    expect((await callWithKey(ctx.app, user, 'PUT', '/v1/me/profile', profile)).statusCode).toBe(200);
    const buzz = (await callWithKey(ctx.app, user, 'POST', '/v1/me/buzzes', { text: 'x' })).json();
    // The first call adds the reaction, the second changes its kind: one statement either way.
    let kind = 'like';
    const sent = await sentBy(() => {
      kind = kind === 'like' ? 'love' : 'like';
      return callWithKey(ctx.app, user, 'PUT', `/v1/me/buzzes/${buzz.id}/reaction`, { kind });
    });
    const texts = sent.statements.map((s) => s.replace(/\s+/g, ' ').trim());
    expect(texts.filter((text) => /buzz_reactions/.test(text))).toHaveLength(1);
    expect(texts.find((text) => /buzz_reactions/.test(text))).toMatch(/^with reaction as .*outbox_endpoints/);
    expect(texts.filter((text) => /outbox_endpoints|update buzzes/.test(text))).toHaveLength(1);
    // A comment too: the comment, the buzz's count and its event.
    const commented = await sentBy(() =>
      callWithKey(ctx.app, user, 'POST', `/v1/me/buzzes/${buzz.id}/comments`, { text: 'nice' }),
    );
    const written = commented.statements
      .map((s) => s.replace(/\s+/g, ' ').trim())
      .filter((text) => /buzz_comments|outbox_endpoints|update buzzes/.test(text));
    expect(written).toHaveLength(1);
    expect(written[0]).toMatch(/^with comment as .*update "buzzes".*outbox_endpoints/);
  });

  it.each(['test', 'live'] as const)(
    'of chat and live mints with a %s key: one Redis script, no SQL',
    async (mode) => {
      const { token } = await createCustomer(ctx.container, { mode, balanceMicros: 1_000_000 });
      // The first mint makes the app's realtime settings, and the next reads them into the cache once.
      await keyed(token, 'POST', '/v1/realtime/chat/tokens', { user_id: 'ana' })();
      const chat = await sentBy(keyed(token, 'POST', '/v1/realtime/chat/tokens', { user_id: 'ana' }));
      expect(chat).toEqual({ statements: [], redis: ['evalsha'] });
      const live = await sentBy(
        keyed(token, 'POST', '/v1/realtime/live/tokens', { room: 'r', identity: 'ana' }),
      );
      expect(live).toEqual({ statements: [], redis: ['evalsha'] });
    },
  );

  it('of a shield ticket and of a chat login: one Redis script, no SQL', async () => {
    const { app, token } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const { publishable_key: publishable } = await ctx.container.realtime.setup({
      appId: app.id,
      mode: 'live',
    });
    const ticket = await sentBy(() =>
      ctx.app.inject({
        method: 'POST',
        url: '/v1/realtime/shield/ticket',
        headers: { 'x-publishable-key': publishable },
        remoteAddress: uniqueAddress(),
        payload: { subject: 'viewer', scope: 'stream' },
      }),
    );
    expect(ticket).toEqual({ statements: [], redis: ['evalsha'] });

    const credential = (await keyed(token, 'POST', '/v1/realtime/chat/tokens', { user_id: 'bo' })()).json();
    const login = await sentBy(() =>
      ctx.internal.inject({
        method: 'POST',
        url: '/internal/ejabberd/auth',
        headers: { authorization: `Bearer ${ctx.container.settings.SVC_EJABBERD_AUTH_SECRET}` },
        payload: { op: 'auth', user: credential.user, server: 'chat.local', password: credential.password },
      }),
    );
    expect(login.statements).toEqual([]);
    expect(login.redis).toHaveLength(1);
  });

  it('of an OTP to an online user: the send, its code and its event in one statement', async () => {
    const { token } = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const credential = await keyed(token, 'POST', '/v1/realtime/chat/tokens', { user_id: 'cy' })();
    sessions.push(await connect(credential.json()));
    // Both sends go to cy, within the 3 codes a recipient takes in 10 minutes.
    const sent = await sentBy(keyed(token, 'POST', '/v1/otp/send', { to: 'cy' }));
    expect(sent.statements.map((s) => s.replace(/\s+/g, ' ').trim().slice(0, 30))).toEqual([
      'begin',
      'select pg_advisory_xact_lock(h',
      'select created_at from message',
      'with sent as ( insert into mes',
      'insert into charges_at_commit ',
      'commit',
    ]);
    expect(sent.redis).toEqual(['evalsha']);
  });
});
