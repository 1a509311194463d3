/**
 * The account's usage report (`GET /v1/realtime/usage?days=`) of an account whose app has `orgs` orgs,
 * each using three metrics every day of the window, beside the same report of an account with the
 * app's own usage only (the floor: the same days, products and metrics, no org). The ratio says what
 * the orgs cost the report; migration 0033 made it read one line of all orgs a day, not one an org.
 *
 * The lines are written straight into PostgreSQL (a generator, as svc_meter would leave them: every
 * org's lines and the app's line of all its orgs), then both reports are timed in turns, one call at
 * a time, through the whole HTTP pipeline. The bench's rows are deleted at the end.
 *
 *   npm run stack -- up --profile test && npx tsx bench/usage-report.ts [orgs] [days] [calls]
 */
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { statement } from '../control-plane/src/db/transaction.js';
import { inTransaction } from '../control-plane/src/platform/transaction.js';
import { createCustomer } from '../control-plane/test/support.js';
import { figures, injectOk, latencyLine, type Run, timed, useTestStackSettings } from './support.js';

useTestStackSettings();
const orgs = Number(process.argv[2] ?? 2_000);
const days = Number(process.argv[3] ?? 90);
const calls = Number(process.argv[4] ?? 200);
const ROUNDS = 4;
const container = await createContainer(loadSettings(process.env));
const app = await buildApp(container, { logger: false });
await app.ready();

const liveCustomer = () =>
  createCustomer(container, { mode: 'live', plan: 'scale', dailyRequestCap: 100_000_000 });
const [withOrgs, ownOnly] = [await liveCustomer(), await liveCustomer()];
const accounts = [withOrgs.account.id, ownOnly.account.id];

/** Lines of one org (or of the app's own usage, ''), for every day of the window and three metrics. */
const lines = (customer: typeof withOrgs, orgIds: string) => statement`
  insert into usage_daily (account_id, app_id, mode, day, product, metric, price_micros, unit_size, org_id,
                           quantity, billable_quantity, cost_micros, updated_at)
  select ${customer.account.id}, ${customer.app.id}, 'live', current_date - d, 'chat', metric, 100, 1, org,
         10, 10, 1000, now()
  from generate_series(0, ${days - 1}) d, unnest(${orgIds}::text[]) org,
       unnest(array['logins', 'messages', 'monthly_active_users']) metric`;

const started = Date.now();
await inTransaction(container.pool, async (tx) => {
  await tx.query(statement`set local statement_timeout = 0`);
  const orgIds = `{${Array.from({ length: orgs }, (_, i) => `org_bench_${i}`).join(',')}}`;
  await tx.query(lines(withOrgs, orgIds));
  await tx.query(lines(withOrgs, '{""}'));
  await tx.query(lines(ownOnly, '{""}'));
  await tx.query(statement`
    insert into usage_all_orgs_daily (account_id, app_id, mode, day, product, metric, price_micros, unit_size,
                                      quantity, billable_quantity, cost_micros, updated_at)
    select account_id, app_id, mode, day, product, metric, price_micros, unit_size, sum(quantity),
           sum(billable_quantity), sum(cost_micros), max(updated_at)
    from usage_daily where account_id = ${withOrgs.account.id} and org_id <> ''
    group by account_id, app_id, mode, day, product, metric, price_micros, unit_size`);
});
await container.pool.query(statement`analyze usage_daily, usage_all_orgs_daily`);
console.log(
  `usage report of ${days} days: an app with ${orgs} orgs (${(orgs * days * 3).toLocaleString('en')} org lines, written in ${((Date.now() - started) / 1000).toFixed(1)} s) beside an app of no org`,
);

const report = (customer: typeof withOrgs) => () =>
  injectOk(app, 'GET', `/v1/realtime/usage?days=${days}`, { authorization: `Bearer ${customer.token}` });
// The two reports must say the same but for the orgs' share: each org line is 10 of a metric a day.
const [orgsReport, ownReport] = [
  (await report(withOrgs)()).json() as { usage: { quantity: number }[] },
  (await report(ownOnly)()).json() as { usage: { quantity: number }[] },
];
const quantity = (r: typeof orgsReport) => r.usage.reduce((sum, line) => sum + line.quantity, 0);
if (quantity(orgsReport) !== quantity(ownReport) * (orgs + 1))
  throw new Error(`the report counted ${quantity(orgsReport)}, not ${quantity(ownReport) * (orgs + 1)}`);

const perRound = Math.ceil(calls / ROUNDS);
const runs = { orgs: [] as Run[], own: [] as Run[] };
await timed(20, 1, report(withOrgs));
await timed(20, 1, report(ownOnly));
for (let round = 0; round < ROUNDS; round += 1) {
  runs.orgs.push(await timed(perRound, 1, report(withOrgs)));
  runs.own.push(await timed(perRound, 1, report(ownOnly)));
}
const [path, floor] = [figures(runs.orgs), figures(runs.own)];
console.log(`  with ${orgs} orgs      ${latencyLine(path)}`);
console.log(`  no org (the floor)  ${latencyLine(floor)}`);
console.log(
  `  ratio of p50s: ${(path.p50 / floor.p50).toFixed(2)}× the floor (the orgs' lines should not count)`,
);

await container.pool.query(statement`
  delete from usage_all_orgs_daily where account_id = any(${`{${accounts.join(',')}}`}::text[])`);
await container.pool.query(statement`
  delete from usage_daily where account_id = any(${`{${accounts.join(',')}}`}::text[])`);
await app.close();
await container.close();
