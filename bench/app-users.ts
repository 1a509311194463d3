import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { createCustomer } from '../control-plane/test/support.js';
import { injectOk, timed, useTestStackSettings } from './support.js';

/**
 * The whole HTTP pipeline of one process on the test stack, for a new app whose users call /v1/me/…
 * (benches of businesses and circles): its secret key, a call that fails the bench on any error, and
 * user tokens minted before any measure.
 */
export async function appWithUsers(options: { concurrency: number; log?: boolean }) {
  useTestStackSettings();
  const settings = loadSettings(process.env);
  const container = await createContainer(settings);
  const app = await buildApp(container, { logger: options.log ? { level: 'error' } : false });
  await app.ready();
  const customer = await createCustomer(container, { plan: 'scale', dailyRequestCap: 100_000_000 });
  const secretKey = { authorization: `Bearer ${customer.token}` };
  const call = injectOk.bind(null, app);

  /** A user token's header for each of `count` users (`<prefix>-<from>` on). */
  const users = async (prefix: string, from: number, count: number) => {
    const tokens: Record<string, string>[] = [];
    let next = 0;
    await timed(count, options.concurrency, async () => {
      const k = next++;
      const minted: { token: string } = (
        await call('POST', `/v1/users/${prefix}-${from + k}/tokens`, secretKey, {})
      ).json();
      tokens[k] = { authorization: `Bearer ${minted.token}` };
    });
    return tokens;
  };

  const close = async () => {
    await app.close();
    await container.close();
  };
  return { settings, container, app, customer, secretKey, call, users, close };
}
