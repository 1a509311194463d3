/**
 * Operator commands until the dashboard exists: accounts, apps, keys, top-ups.
 * Prints JSON on stdout; a new secret key is printed once and never again.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, loadSettings } from '../config/load.js';
import { createCore } from '../core.js';
import { runMigrations } from '../db/migrate.js';
import type { AccountsService } from '../modules/accounts/service.js';
import { type BillingService, usdNumber } from '../modules/billing/service.js';
import { presentPriceTable } from '../modules/pricing/service.js';
import { KEY_KINDS, KEY_MODES, type KeyKind, type KeyMode, PLANS, type Plan } from '../platform/caller.js';
import { ServiceError } from '../platform/errors.js';
import { parseUsd } from '../platform/money.js';
import type { Prices } from '../platform/prices.js';

const USAGE = `usage: npm run admin -- <command> [options]

  account create --name NAME [--plan free|pro|scale] [--daily-cap N]
  account list
  account set-plan --account ID --plan free|pro|scale [--daily-cap N]
  app create --account ID --name NAME
  app list --account ID
  key create --app ID --mode live|test [--kind secret|publishable]
  key list --app ID
  key revoke --key ID
  balance topup --account ID --amount-usd AMOUNT --reference REF
  balance show --account ID
  price list
  price set --metric PRODUCT.METRIC [--usd PRICE] [--allowance UNITS]
  price reset --metric PRODUCT.METRIC      back to the configured or shipped value
  dev-key --state-file PATH    ensure a local account, app and test key; print them

Runs against SVC_DATABASE_URL (npm run admin loads the dev stack's settings; --profile test for the test stack).`;

class UsageError extends Error {}

const OPTIONS = {
  name: { type: 'string' },
  plan: { type: 'string' },
  'daily-cap': { type: 'string' },
  account: { type: 'string' },
  app: { type: 'string' },
  mode: { type: 'string' },
  kind: { type: 'string' },
  key: { type: 'string' },
  'amount-usd': { type: 'string' },
  reference: { type: 'string' },
  'state-file': { type: 'string' },
  metric: { type: 'string' },
  usd: { type: 'string' },
  allowance: { type: 'string' },
  help: { type: 'boolean' },
} as const;

type Options = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

function required(options: Options, name: keyof Options): string {
  const value = options[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function oneOf<T extends string>(value: string, allowed: readonly T[], name: string): T {
  if (!(allowed as readonly string[]).includes(value))
    throw new UsageError(`--${name} must be one of ${allowed.join(', ')}`);
  return value as T;
}

function optionalCap(options: Options): number | null {
  if (options['daily-cap'] === undefined) return null;
  const cap = Number(options['daily-cap']);
  if (!Number.isSafeInteger(cap) || cap <= 0)
    throw new UsageError('--daily-cap must be a positive whole number');
  return cap;
}

interface Services {
  accounts: AccountsService;
  billing: BillingService;
  prices: Prices;
}

function metricOf(options: Options): [string, string] {
  const [product = '', metric = ''] = required(options, 'metric').split('.');
  return [product, metric];
}

function usdAmount(text: string | undefined, option: string, allowZero: boolean): number {
  try {
    const micros = parseUsd(text ?? '');
    if (micros > 0 || allowZero) return micros;
  } catch {
    // reported below
  }
  throw new UsageError(
    `--${option} must be a ${allowZero ? '' : 'positive '}USD amount with at most 6 decimals, e.g. 25 or 0.50`,
  );
}

/** Reuses the stored local key while it still works; otherwise makes the account, app and key anew. */
async function devKey({ accounts }: Services, stateFile: string) {
  if (existsSync(stateFile)) {
    const saved = JSON.parse(readFileSync(stateFile, 'utf8')) as {
      account_id: string;
      app_id: string;
      key: string;
    };
    const check = await accounts.checkSecretKey(saved.key);
    if (check.ok && check.principal.appId === saved.app_id) return saved;
  }
  const account = await accounts.createAccount({ name: 'Local developer', plan: 'pro' });
  const app = await accounts.createApp({ accountId: account.id, name: 'local' });
  const { token } = await accounts.createKey({ appId: app.id, kind: 'secret', mode: 'test' });
  const saved = { account_id: account.id, app_id: app.id, key: token };
  writeFileSync(stateFile, `${JSON.stringify(saved, null, 2)}\n`, { mode: 0o600 });
  return saved;
}

async function run(command: string, options: Options, services: Services): Promise<unknown> {
  const { accounts, billing, prices } = services;
  switch (command) {
    case 'account create':
      return accounts.createAccount({
        name: required(options, 'name'),
        plan: oneOf(options.plan ?? 'free', PLANS, 'plan') as Plan,
        dailyRequestCap: optionalCap(options),
      });
    case 'account list':
      return accounts.listAccounts();
    case 'account set-plan':
      return accounts.setPlan(
        required(options, 'account'),
        oneOf(required(options, 'plan'), PLANS, 'plan'),
        optionalCap(options),
      );
    case 'app create':
      return accounts.createApp({ accountId: required(options, 'account'), name: required(options, 'name') });
    case 'app list':
      return accounts.listApps(required(options, 'account'));
    case 'key create': {
      const { key, token } = await accounts.createKey({
        appId: required(options, 'app'),
        mode: oneOf(required(options, 'mode'), KEY_MODES, 'mode') as KeyMode,
        kind: oneOf(options.kind ?? 'secret', KEY_KINDS, 'kind') as KeyKind,
      });
      return {
        ...key,
        token,
        note: key.kind === 'secret' ? 'store this key now: it is not shown again' : undefined,
      };
    }
    case 'key list':
      return accounts.listKeys(required(options, 'app'));
    case 'key revoke':
      return accounts.revokeKey(required(options, 'key'));
    case 'balance topup': {
      const { entry, replayed } = await billing.topUp({
        accountId: required(options, 'account'),
        amountMicros: usdAmount(options['amount-usd'], 'amount-usd', false),
        reference: required(options, 'reference'),
      });
      return { ...entry, amount_usd: usdNumber(entry.amount_micros), replayed };
    }
    case 'balance show':
      return billing.getBalance(required(options, 'account'));
    case 'price list':
      return presentPriceTable(await prices.table());
    case 'price set': {
      const [product, metric] = metricOf(options);
      if (options.usd === undefined && options.allowance === undefined)
        throw new UsageError('give --usd, --allowance or both');
      if (options.usd !== undefined)
        await prices.setPrice(product, metric, usdAmount(options.usd, 'usd', true));
      if (options.allowance !== undefined) {
        const units = Number(options.allowance);
        if (!/^\d+(\.\d+)?$/.test(options.allowance))
          throw new UsageError('--allowance must be a number of units, 0 or more');
        await prices.setAllowance(product, metric, units);
      }
      return presentPriceTable(await prices.table()).prices.find(
        (p) => p.product === product && p.metric === metric,
      );
    }
    case 'price reset': {
      const [product, metric] = metricOf(options);
      await prices.resetToConfigured(product, metric);
      return presentPriceTable(await prices.table()).prices.find(
        (p) => p.product === product && p.metric === metric,
      );
    }
    case 'dev-key':
      return devKey(services, required(options, 'state-file'));
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({ options: OPTIONS, allowPositionals: true, strict: true });
  const command = positionals.join(' ');
  if (values.help || command === '') {
    process.stdout.write(`${USAGE}\n`);
    return command === '' && !values.help ? 2 : 0;
  }
  if (!process.env.SVC_DATABASE_URL)
    throw new UsageError('SVC_DATABASE_URL is not set (start the stack with npm start first)');
  // The control plane's own core: a revoked key or a new price reaches every replica's caches.
  const core = await createCore(loadSettings(process.env));
  try {
    await runMigrations(core.pool);
    const result = await run(command, values, core);
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
    return 0;
  } finally {
    await core.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    const expected = [UsageError, ServiceError, ConfigError].some((kind) => error instanceof kind);
    const detail = error instanceof Error ? (expected ? error.message : error.stack) : String(error);
    process.stderr.write(`admin: ${detail}\n`);
    process.exit(expected ? 2 : 1);
  },
);
