import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Container } from '../../control-plane/src/container.js';
import { createCustomer, openContainer, stackSettings } from '../../e2e/support/stack.js';
import {
  type Answer,
  createServerClient,
  createUserClient,
  type ServerClient,
  type UserClient,
} from '../src/index.js';

// One call of every operation group, through the client that holds its credential, against the
// running stack with a test key (whose app has the public-data sandbox). The tables are typed by
// the clients' own groups, so a group the API gains without a call here fails the type check.

type Groups<Client> = Exclude<keyof Client, 'call' | 'paginate'>;
type GroupCalls<Client> = Record<Groups<Client>, (client: Client) => Promise<Answer<unknown>>>;

/** A sandbox moment's media id, for the media group (its URLs are the only way to one). */
let mediaId: string;

const SERVER_CALLS: GroupCalls<ServerClient> = {
  ai: (svc) => svc.ai.moderate({ body: { text: 'a friendly hello' } }),
  billing: (svc) => svc.billing.usage.get({ query: { days: 7 } }),
  buzzes: (svc) => svc.buzzes.list({ query: { limit: 1 } }),
  chat: (svc) => svc.chat.rooms.create({ body: { room: 'lobby' } }),
  live: (svc) => svc.live.tokens.create({ body: { room: 'groups', identity: 'groups-user' } }),
  media: (svc) => svc.media.read({ path: { id: mediaId } }),
  moments: (svc) => svc.moments.list({ query: { limit: 1 } }),
  orgs: (svc) => svc.orgs.list({ query: { limit: 1 } }),
  otp: (svc) => svc.otp.send({ body: { to: 'groups-user' } }),
  pricing: (svc) => svc.pricing.get(),
  profiles: async (svc) => {
    const [buzz] = (await svc.buzzes.list({ query: { limit: 1 } })).data.items;
    return svc.profiles.read({ path: { username: buzz!.author_username } });
  },
  promo: (svc) => svc.promo.send({ body: { to: 'groups-user', text: 'a new season' } }),
  realtime: (svc) => svc.realtime.app.setup({ body: {} }),
  search: (svc) => svc.search({ query: { q: 'music' } }),
  shield: (svc) => svc.shield.report.get({ query: { days: 1 } }),
  storage: (svc) => svc.storage.objects.list({ query: { limit: 1 } }),
  studio: (svc) => svc.studio.list({ query: { limit: 1 } }),
  system: (svc) => svc.system.health(),
  users: (svc) => svc.users.tokens.create({ path: { user_id: 'groups-user' }, body: {} }),
  webhooks: (svc) => svc.webhooks.endpoints.list({ query: { limit: 1 } }),
};

const USER_CALLS: GroupCalls<UserClient> = {
  businesses: (me) => me.businesses.list({ query: { limit: 1 } }),
  circles: (me) => me.circles.list({ query: { limit: 1 } }),
  me: (me) => me.me.profile.read(),
  media: (me) => me.media.read({ path: { id: mediaId } }),
  system: (me) => me.system.ready(),
  users: (me) => me.users.jwks(),
};

let container: Container;
beforeAll(async () => {
  container = await openContainer();
});
afterAll(async () => {
  await container.close();
});

it('answers one call of every operation group, on the server and in the app', async () => {
  const customer = await createCustomer(container);
  const baseUrl = stackSettings().SVC_PUBLIC_URL;
  const svc = createServerClient({ baseUrl, secretKey: customer.token });
  const moments = await svc.moments.list({ query: { limit: 1 } });
  mediaId = /\/media\/(med_\w+)/.exec(JSON.stringify(moments.data))![1]!;
  const token = (await svc.users.tokens.create({ path: { user_id: 'groups-user' }, body: {} })).data.token;
  const me = createUserClient({ baseUrl, token });
  await me.me.profile.put({ body: { username: 'groups_user', full_name: 'Groups User' } });

  const answered: Record<string, number> = {};
  for (const [group, call] of Object.entries(SERVER_CALLS))
    answered[`server ${group}`] = (await call(svc)).status;
  for (const [group, call] of Object.entries(USER_CALLS)) answered[`app ${group}`] = (await call(me)).status;
  expect(Object.entries(answered).filter(([, status]) => status < 200 || status > 299)).toEqual([]);
  // A media file is bytes, not JSON: a Blob of its own type.
  const file = (await svc.media.read({ path: { id: mediaId } })).data;
  expect(file).toBeInstanceOf(Blob);
  expect([file.type, file.size > 0]).toEqual(['video/mp4', true]);
  expect(Object.keys(answered)).toHaveLength(
    Object.keys(SERVER_CALLS).length + Object.keys(USER_CALLS).length,
  );
}, 120_000);
