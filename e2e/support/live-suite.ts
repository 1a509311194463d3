import { afterAll, afterEach, beforeAll } from 'vitest';
import type { Container } from '../../control-plane/src/container.js';
import { disposeLiveKit, join, type LiveParticipant } from './livekit.js';
import { type createCustomer, meterNow, openContainer } from './stack.js';

type StackCustomer = Awaited<ReturnType<typeof createCustomer>>;

/**
 * For one test file with real LiveKit participants: the stack's services (filled in before the tests
 * run), participants that leave after each test whatever happens, and the native client released at
 * the end.
 */
export function useLiveSuite() {
  const participants: LiveParticipant[] = [];
  const suite = {
    container: undefined as unknown as Container,

    /** Joins with a minted token; the participant leaves after the test. */
    join: async (url: string, token: string): Promise<LiveParticipant> => {
      const participant = await join(url, token);
      participants.push(participant);
      return participant;
    },

    /**
     * Uses up the account's free minutes of a metric for the month, so that the minutes the test
     * makes are priced; returns the price per minute in micro-dollars.
     */
    priceBeyondAllowance: async (customer: StackCustomer, product: string, metric: string) => {
      const price = (await suite.container.prices.table()).get(`${product}.${metric}`)!;
      const payer = { accountId: customer.account.id, appId: customer.app.id, mode: customer.key.mode };
      await meterNow(suite.container, payer, [{ product, metric, quantity: price.allowance }]);
      return price.priceMicros;
    },
  };
  beforeAll(async () => {
    suite.container = await openContainer();
  });
  afterEach(async () => {
    await Promise.all(participants.splice(0).map((participant) => participant.leave()));
  });
  afterAll(async () => {
    await disposeLiveKit();
    await suite.container?.close();
  });
  return suite;
}
