/**
 * Priced calls per second through the whole HTTP pipeline of one control-plane process (one core):
 * key check, daily cap, balance pre-check, then one transaction with the call's write, the usage
 * row, the allowance, the debit and the ledger's usage line. Live keys, so every call is charged.
 *
 *   npm run stack -- up --profile test && npx tsx bench/priced-calls.ts [calls] [concurrency]
 */
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { runMigrations } from '../control-plane/src/db/migrate.js';
import { createPricedProbeTable, pricedProbe } from '../control-plane/test/priced-probe.js';
import { report, runConcurrently, useTestStackSettings } from './support.js';

useTestStackSettings();
const calls = Number(process.argv[2] ?? 5_000);
const concurrency = Number(process.argv[3] ?? 16);

const container = await createContainer(loadSettings(process.env));
await runMigrations(container.pool);
await createPricedProbeTable(container);
const app = await buildApp(container, { logger: false, routes: pricedProbe() });
await app.ready();

async function liveKeys(count: number): Promise<string[]> {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const account = await container.accounts.createAccount({
        name: 'bench',
        plan: 'scale',
        dailyRequestCap: 10_000_000,
      });
      const created = await container.accounts.createApp({ accountId: account.id, name: 'bench' });
      const { token } = await container.accounts.createKey({
        appId: created.id,
        kind: 'secret',
        mode: 'live',
      });
      await container.billing.topUp({
        accountId: account.id,
        amountMicros: 1_000_000_000,
        reference: 'bench',
      });
      return token;
    }),
  );
}

async function measure(label: string, tokens: string[]) {
  let i = 0;
  const started = performance.now();
  const latencies = await runConcurrently(calls, concurrency, async () => {
    const token = tokens[i++ % tokens.length]!;
    const response = await app.inject({
      method: 'POST',
      url: '/test/priced',
      headers: { authorization: `Bearer ${token}` },
    });
    if (response.statusCode !== 200) throw new Error(`unexpected ${response.statusCode}: ${response.body}`);
  });
  console.log(report(label, latencies, performance.now() - started));
}

console.log(`priced calls, ${calls} per run, ${concurrency} in flight, node ${process.version}`);
await measure('warm-up (discarded)', await liveKeys(1));
await measure('one account (every call takes the same balance row lock)', await liveKeys(1));
await measure('16 accounts', await liveKeys(16));
await app.close();
await container.close();
