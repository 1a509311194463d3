import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createCustomer,
  ejabberdAsOperator,
  startTestApp,
  type TestContext,
  uniqueAddress,
} from './support.js';

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
  const response = await ejabberdAsOperator(ctx.container.settings, 'get_room_options', { name, service });
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

  it('makes a room ejabberd no longer has again, with the new size, and sizes the others', async () => {
    const { token } = await createCustomer(ctx.container);
    const [kept, lost] = await Promise.all(
      ['kept', 'lost'].map(async (name) =>
        (await call('POST', '/v1/realtime/chat/rooms', token, { room: name })).json(),
      ),
    );
    const [name, service] = lost.room.split('@');
    const destroyed = await ejabberdAsOperator(ctx.container.settings, 'destroy_room', { name, service });
    expect(destroyed.status).toBe(200);
    // ejabberd answers an empty set of options for a room it does not have, once the room's process
    // has stopped (destroy_room answers before).
    await expect
      .poll(() =>
        ejabberdAsOperator(ctx.container.settings, 'get_room_options', { name, service }).then((r) =>
          r.text(),
        ),
      )
      .toBe('{}');
    // The command resizes the room it has and names the one it has not.
    const keptNode = kept.room.split('@')[0];
    expect(await ctx.container.ejabberd.setRoomsMaxUsers([keptNode, name], 4)).toEqual([name]);
    expect(await roomOptions(kept.room)).toMatchObject({ max_users: '4' });
    expect((await call('PATCH', '/v1/realtime/app', token, { max_room_size: 5 })).statusCode).toBe(200);
    for (const room of [kept, lost]) expect(await roomOptions(room.room)).toMatchObject({ max_users: '5' });
  });

  it('keeps rooms whose names differ only by case apart, and sizes them all', async () => {
    const { token } = await createCustomer(ctx.container);
    const [upper, lower, email] = await Promise.all(
      ['Lobby', 'lobby', 'Support@Acme'].map(async (name) => {
        const response = await call('POST', '/v1/realtime/chat/rooms', token, { room: name });
        expect(response.statusCode, name).toBe(200);
        return response.json();
      }),
    );
    expect(upper.room).toMatch(/^[a-z0-9]{10}\.~jrxweytz@conference\.chat\.local$/);
    expect(lower.room).toMatch(/^[a-z0-9]{10}\.lobby@conference\.chat\.local$/);
    expect(new Set([upper.room, lower.room, email.room]).size).toBe(3);
    expect([upper.name, lower.name, email.name]).toEqual(['Lobby', 'lobby', 'Support@Acme']);
    // A later size reaches every room under its own address in ejabberd.
    expect((await call('PATCH', '/v1/realtime/app', token, { max_room_size: 3 })).statusCode).toBe(200);
    for (const room of [upper, lower, email])
      expect(await roomOptions(room.room)).toMatchObject({ max_users: '3' });
  });

  it.each(['', ' lobby', 'lob\u202Eby', 'lobby\u2069', 'lob\nby', 'r'.repeat(129)])(
    'refuses room name %j with 422',
    async (name) => {
      const { token } = await createCustomer(ctx.container);
      const response = await call('POST', '/v1/realtime/chat/rooms', token, { room: name });
      expect(response.statusCode).toBe(422);
      expect(response.json().error.fields[0]).toMatchObject({ in: 'body', field: 'room' });
    },
  );
});
