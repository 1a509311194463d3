import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

const send = (method: 'POST' | 'PATCH', token: string, payload?: object) =>
  ctx.app.inject({
    method,
    url: '/v1/realtime/app',
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: uniqueAddress(),
    ...(payload ? { payload } : {}),
  });

describe('POST /v1/realtime/app', () => {
  it('sets the app up once and answers the same settings every time, also when called at once', async () => {
    const { token, app } = await createCustomer(ctx.container);
    const answers = await Promise.all([send('POST', token), send('POST', token), send('POST', token)]);
    for (const answer of answers) expect(answer.statusCode).toBe(200);
    const first = answers[0]!.json();
    expect(answers.map((answer) => answer.json())).toEqual([first, first, first]);
    expect(first).toEqual({
      app_id: app.id,
      publishable_key: expect.stringMatching(/^pk_test_[0-9A-Za-z]{32}$/),
      mam: false,
      products: ['chat', 'live', 'calls'],
      max_room_size: 100,
      chat_host: 'chat.local',
      shield_secret: expect.stringMatching(/^shs_[0-9A-Za-z]{32}$/),
    });
    expect((await send('POST', token)).json()).toEqual(first);
  });

  it('keeps live and test settings apart: each mode has its own publishable key and shield secret', async () => {
    const { token, app } = await createCustomer(ctx.container, { mode: 'test' });
    const live = await ctx.container.accounts.createKey({ appId: app.id, kind: 'secret', mode: 'live' });
    const testSettings = (await send('POST', token)).json();
    const liveSettings = (await send('POST', live.token)).json();
    expect(liveSettings.publishable_key).toMatch(/^pk_live_/);
    expect(liveSettings.shield_secret).not.toBe(testSettings.shield_secret);
  });
});

describe('PATCH /v1/realtime/app', () => {
  it('changes products and the room size within 2-100,000', async () => {
    const { token } = await createCustomer(ctx.container);
    for (const size of [2, 100_000]) {
      const response = await send('PATCH', token, { max_room_size: size });
      expect(response.statusCode).toBe(200);
      expect(response.json().max_room_size).toBe(size);
    }
    const products = await send('PATCH', token, { products: ['live'] });
    expect(products.json()).toMatchObject({ products: ['live'], max_room_size: 100_000 });
    expect((await send('POST', token)).json().products).toEqual(['live']);
    expect((await send('PATCH', token, { products: [] })).json().products).toEqual([]);
  });

  it.each([
    [{ max_room_size: 1 }, 'max_room_size', 'must be >= 2'],
    [{ max_room_size: 100_001 }, 'max_room_size', 'must be <= 100000'],
    [{ max_room_size: 2.5 }, 'max_room_size', 'must be integer'],
    [{ mam: 'yes' }, 'mam', 'must be boolean'],
    [{ products: ['chat', 'video'] }, 'products.1', undefined],
    [{ products: ['chat', 'chat'] }, 'products', undefined],
    [{ colour: 'red' }, 'colour', 'is not a known field'],
  ])('refuses %j with 422 naming the field', async (payload, field, message) => {
    const { token } = await createCustomer(ctx.container);
    const response = await send('PATCH', token, payload);
    expect(response.statusCode).toBe(422);
    const fields = response.json().error.fields as { field: string; message: string }[];
    expect(fields.map((f) => f.field)).toContain(field);
    if (message) expect(fields.find((f) => f.field === field)?.message).toBe(message);
  });

  it('answers an empty change with the settings, changing nothing', async () => {
    const { token } = await createCustomer(ctx.container);
    const changed = await send('PATCH', token, { max_room_size: 7, mam: false });
    expect(changed.statusCode).toBe(200);
    const unchanged = await send('PATCH', token, {});
    expect(unchanged.statusCode).toBe(200);
    expect(unchanged.json()).toEqual(changed.json());
    expect((await send('POST', token)).json()).toEqual(changed.json());
  });
});
