import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

const call = (method: 'POST' | 'PATCH', url: string, token: string, payload: object) =>
  ctx.app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: uniqueAddress(),
    payload,
  });

/** The room's options as ejabberd itself reports them. */
async function roomOptions(address: string): Promise<Record<string, string>> {
  const [name, service] = address.split('@');
  const response = await fetch(`${ctx.container.settings.SVC_EJABBERD_API_URL}/get_room_options`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, service }),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as Record<string, string>;
}

describe('POST /v1/realtime/chat/rooms', () => {
  it('returns the full address and makes the room exist with the app’s size and archiving', async () => {
    const { token } = await createCustomer(ctx.container);
    await call('PATCH', '/v1/realtime/app', token, { max_room_size: 7 });
    const response = await call('POST', '/v1/realtime/chat/rooms', token, { room: 'lobby' });
    expect(response.statusCode).toBe(200);
    const room = response.json();
    expect(room).toEqual({
      room: expect.stringMatching(/^[a-z0-9]{10}\.lobby@conference\.chat\.local$/),
      name: 'lobby',
      max_occupants: 7,
      mam: false,
    });
    const options = await roomOptions(room.room);
    expect(options).toMatchObject({ max_users: '7', mam: 'true', persistent: 'true', public: 'false' });
    expect((await call('POST', '/v1/realtime/chat/rooms', token, { room: 'lobby' })).json()).toEqual(room);
  });

  it('applies later changes of the room size to the app’s existing rooms, and archiving to the app', async () => {
    const { token } = await createCustomer(ctx.container);
    const rooms = await Promise.all(
      ['a', 'b', 'c'].map(async (name) =>
        (await call('POST', '/v1/realtime/chat/rooms', token, { room: name })).json(),
      ),
    );
    const patched = await call('PATCH', '/v1/realtime/app', token, { max_room_size: 2, mam: true });
    expect(patched.statusCode).toBe(200);
    for (const room of rooms)
      expect(await roomOptions(room.room)).toMatchObject({ max_users: '2', mam: 'true' });
    expect((await call('POST', '/v1/realtime/chat/rooms', token, { room: 'd' })).json()).toMatchObject({
      max_occupants: 2,
      mam: true,
    });
  });

  it.each(['', 'Lobby', 'a b', 'a@b', 'r'.repeat(65)])('refuses room name %j with 422', async (name) => {
    const { token } = await createCustomer(ctx.container);
    const response = await call('POST', '/v1/realtime/chat/rooms', token, { room: name });
    expect(response.statusCode).toBe(422);
    expect(response.json().error.fields[0]).toMatchObject({ in: 'body', field: 'room' });
  });
});
