import { afterAll, beforeAll, expect } from 'vitest';
import { type ChatCredential, type ChatSession, connect } from '../../e2e/support/xmpp.js';
import { callWithKey, createCustomer, startTestApp, type TestContext } from './support.js';

/**
 * A test file's app and the chat sessions its tests open: started before the file's tests, the
 * sessions stopped and the app closed after them.
 */
export function chatTestFile() {
  const file = { ctx: undefined as unknown as TestContext, sessions: [] as ChatSession[] };
  beforeAll(async () => {
    file.ctx = await startTestApp();
  });
  afterAll(async () => {
    await Promise.all(file.sessions.map((session) => session.stop()));
    await file.ctx.close();
  });
  return file;
}

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * A new app of the test context with users of its own: each calls /v1/me/… with a user token its
 * server minted, and logs in to chat with its personal identity or its (only) org identity. Every
 * session opened goes to `sessions`, for the file to stop at its end.
 */
export async function appWithUsers(ctx: TestContext, sessions: ChatSession[] = []) {
  const made = await createCustomer(ctx.container);
  const asApp = (method: Method, url: string, payload?: object) =>
    callWithKey(ctx.app, made.token, method, url, payload);
  const online = async (credential: ChatCredential) => {
    const session = await connect(credential);
    sessions.push(session);
    return session;
  };
  const user = async (userId: string) => {
    const minted = await asApp('POST', `/v1/users/${encodeURIComponent(userId)}/tokens`, {});
    expect(minted.statusCode, minted.body).toBe(200);
    const token = minted.json().token as string;
    const call = (method: Method, url: string, payload?: object) =>
      callWithKey(ctx.app, token, method, url, payload);
    /** The user's personal code. */
    const code = async () => (await call('GET', '/v1/me/code')).json().code as string;
    /** A chat credential for one of the user's org identities (by default their only one in this app). */
    const workCredential = async (memberId?: string): Promise<ChatCredential> => {
      const id = memberId ?? (await call('GET', '/v1/me/org-memberships')).json().items[0].id;
      const credential = await call('POST', `/v1/me/org-memberships/${id}/chat-token`, {});
      expect(credential.statusCode, credential.body).toBe(200);
      return credential.json();
    };
    return {
      userId,
      call,
      code,
      workCredential,
      /** Logs in with the user's personal identity. */
      personal: async () =>
        online((await asApp('POST', '/v1/realtime/chat/tokens', { user_id: userId })).json()),
      /** Logs in with one of the user's org identities (by default their only one). */
      atWork: async (memberId?: string) => online(await workCredential(memberId)),
    };
  };
  return { ...made, asApp, user, online };
}

export type AppUser = Awaited<ReturnType<Awaited<ReturnType<typeof appWithUsers>>['user']>>;
