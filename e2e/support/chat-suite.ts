import { afterAll, beforeAll, expect } from 'vitest';
import type { Container } from '../../control-plane/src/container.js';
import { api, type Customer, openContainer } from './stack.js';
import { type ChatCredential, type ChatSession, connect } from './xmpp.js';

/**
 * For one test file with real chat logins: the stack's services (filled in before the tests run),
 * credentials minted by the running control plane, and sessions that all stop at the end.
 */
export function useChatSuite() {
  const sessions: ChatSession[] = [];
  const suite = {
    container: undefined as unknown as Container,

    mint: async (customer: Customer, userId: string, ttl?: number): Promise<ChatCredential> => {
      const response = await api<ChatCredential>(customer, 'POST', '/v1/realtime/chat/tokens', {
        user_id: userId,
        ...(ttl ? { ttl_seconds: ttl } : {}),
      });
      expect(response.status).toBe(200);
      return response.body;
    },

    /** A session logged in some other way, stopped at the end with the rest. */
    stopAtEnd: (session: ChatSession): ChatSession => {
      sessions.push(session);
      return session;
    },

    /** Logs in at the credential's WebSocket URL, or at `ws` (one node of a cluster). */
    online: async (credential: ChatCredential, ws = credential.ws): Promise<ChatSession> =>
      suite.stopAtEnd(await connect({ ...credential, ws })),
  };
  beforeAll(async () => {
    suite.container = await openContainer();
  });
  afterAll(async () => {
    await Promise.all(sessions.splice(0).map((session) => session.stop()));
    await suite.container.close();
  });
  return suite;
}
