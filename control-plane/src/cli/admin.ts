/**
 * Operator commands until the dashboard exists: accounts, apps, keys, top-ups, webhook endpoints.
 * Prints JSON on stdout; a new secret key or signing secret is printed once and never again.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, commaSeparated, loadSettings } from '../config/load.js';
import { createCore } from '../core.js';
import { runMigrations } from '../db/migrate.js';
import type { AccountsService } from '../modules/accounts/service.js';
import { type BillingService, usdNumber } from '../modules/billing/service.js';
import type { DashboardService } from '../modules/dashboard/service.js';
import { presentPriceTable } from '../modules/pricing/service.js';
import type { UserTokens } from '../modules/users/service.js';
import { MAX_PROFILE_IDS, MAX_URL_LENGTH } from '../modules/webhooks/schema.js';
import type { WebhookScope, WebhooksService } from '../modules/webhooks/service.js';
import { KEY_KINDS, KEY_MODES, type KeyKind, type KeyMode, PLANS, type Plan } from '../platform/caller.js';
import { errors, ServiceError } from '../platform/errors.js';
import { isDisplayName, isExternalId } from '../platform/identities.js';
import { parseUsd } from '../platform/money.js';
import { EVENT_TYPES } from '../platform/outbox.js';
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
  dashboard invite --account ID --email EMAIL
                               an invitation to be an owner of the account's dashboard: prints
                               the link (once; it works once, for 3 days)
  dev-key --state-file PATH    ensure a local account, app and test key; print them
  user-token-key rotate        publish the next signing key of user tokens now (it signs in 10
                               minutes; the service also rotates every 90 days by itself)

  webhook create --app ID --mode live|test --url URL --events TYPE,… [--profiles P1,P2,…]
                 [--description TEXT] [--disabled]     prints the signing secret, once only
  webhook list --app ID --mode live|test               every endpoint of the app in that mode
  webhook show --app ID --mode live|test --endpoint ID
  webhook update --app ID --mode live|test --endpoint ID [--url URL] [--events TYPE,…]
                 [--profiles P1,P2,…|--all-profiles] [--description TEXT|''] [--enable|--disable]
  webhook delete --app ID --mode live|test --endpoint ID          with its deliveries
  webhook rotate --app ID --mode live|test --endpoint ID          a new secret, printed once;
                                                                  the old one signs nothing more
  webhook test --app ID --mode live|test --endpoint ID            queues a ping event
  webhook deliveries --app ID --mode live|test --endpoint ID [--status pending|succeeded|failed]
                 [--limit N]                           newest first, the last N (100 unless --limit)
  webhook delivery --app ID --mode live|test --endpoint ID --delivery ID    with its attempt log
  webhook redeliver --app ID --mode live|test --endpoint ID --delivery ID   queues the same event

  Event types: ${EVENT_TYPES.join(', ')}.
  --profiles narrows the profile events (buzz.*, sip.created, follow.created) to those profiles.
  The CLI sends no webhook itself: test and redeliver only queue the delivery, which the running
  control plane's delivery worker sends; follow it with webhook delivery.

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
  url: { type: 'string' },
  events: { type: 'string' },
  profiles: { type: 'string' },
  'all-profiles': { type: 'boolean' },
  description: { type: 'string' },
  disabled: { type: 'boolean' },
  enable: { type: 'boolean' },
  disable: { type: 'boolean' },
  endpoint: { type: 'string' },
  delivery: { type: 'string' },
  status: { type: 'string' },
  limit: { type: 'string' },
  email: { type: 'string' },
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
  dashboard: DashboardService;
  settings: { SVC_PUBLIC_URL: string };
  prices: Prices;
  webhooks: WebhooksService;
  userTokens: UserTokens;
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

/** A comma-separated option's values: at least one, none twice. */
function commaList(options: Options, name: 'events' | 'profiles'): string[] {
  const values = commaSeparated(required(options, name));
  if (values.length === 0) throw new UsageError(`--${name} needs at least one value`);
  const twice = values.find((value, index) => values.indexOf(value) !== index);
  if (twice !== undefined) throw new UsageError(`--${name} lists "${twice}" twice`);
  return values;
}

function eventTypes(options: Options): string[] {
  const types = commaList(options, 'events');
  const unknown = types.find((type) => !(EVENT_TYPES as readonly string[]).includes(type));
  if (unknown !== undefined)
    throw new UsageError(`--events: unknown event type "${unknown}"; one of ${EVENT_TYPES.join(', ')}`);
  return types;
}

function profileIds(options: Options): string[] {
  const ids = commaList(options, 'profiles');
  if (ids.length > MAX_PROFILE_IDS) throw new UsageError(`--profiles takes at most ${MAX_PROFILE_IDS} ids`);
  const bad = ids.find((id) => !isExternalId(id));
  if (bad !== undefined)
    throw new UsageError(
      `--profiles: "${bad}" is not a profile id (1-128 bytes of letters, digits, punctuation and symbols)`,
    );
  return ids;
}

function endpointUrl(options: Options): string {
  const url = required(options, 'url');
  if (url.length > MAX_URL_LENGTH) throw new UsageError(`--url must be at most ${MAX_URL_LENGTH} characters`);
  return url; // the service checks the rest (scheme, credentials, address)
}

function description(text: string, allowEmpty: boolean): string {
  if (allowEmpty && text === '') return text;
  if (text.length > 256 || !isDisplayName(text))
    throw new UsageError(
      '--description must be 1-256 characters, with no control, bidi-control or line-separator characters and no space at either end',
    );
  return text;
}

function positiveLimit(options: Options, fallback: number): number {
  if (options.limit === undefined) return fallback;
  const limit = Number(options.limit);
  if (!Number.isSafeInteger(limit) || limit <= 0)
    throw new UsageError('--limit must be a positive whole number');
  return limit;
}

/** The service's own field names, as the options that carry them. */
const FLAG_OF_FIELD: Record<string, string> = {
  url: 'url',
  event_types: 'events',
  profile_ids: 'profiles',
  description: 'description',
};

/**
 * The service's refusals in the command's terms: a field it refused (a URL it will not deliver to)
 * as the option it came from; an endpoint or delivery not found with the ids and mode looked in.
 */
function explained(error: unknown, options: Options, scope: WebhookScope): unknown {
  if (!(error instanceof ServiceError)) return error;
  const fields = error.fields ?? [];
  if (fields.length > 0 && fields.every((field) => field.field in FLAG_OF_FIELD))
    return new UsageError(
      fields.map((field) => `--${FLAG_OF_FIELD[field.field]} ${field.message}`).join('; '),
    );
  if (error.type === 'not_found') {
    const where = `in app ${scope.appId} (${scope.mode} mode)`;
    return new ServiceError(
      'not_found',
      error.message.startsWith('Delivery')
        ? `Delivery ${options.delivery} not found for endpoint ${options.endpoint} ${where}`
        : `Webhook endpoint ${options.endpoint} not found ${where}`,
    );
  }
  return error;
}

const SECRET_NOTE = 'store this signing secret now: it is not shown again';
const QUEUED_NOTE =
  "queued: the running control plane's delivery worker sends it (this command does not); see it with webhook delivery";

const WEBHOOK_COMMANDS = [
  'create',
  'list',
  'show',
  'update',
  'delete',
  'rotate',
  'test',
  'deliveries',
  'delivery',
  'redeliver',
];

async function webhook(command: string, options: Options, services: Services): Promise<unknown> {
  if (!WEBHOOK_COMMANDS.includes(command)) throw new UsageError(`unknown command "webhook ${command}"`);
  const appId = required(options, 'app');
  const scope: WebhookScope = { appId, mode: oneOf(required(options, 'mode'), KEY_MODES, 'mode') };
  if (!(await services.accounts.getApp(appId))) throw errors.notFound(`App ${appId}`);
  try {
    return await webhookCommand(command, options, scope, services.webhooks);
  } catch (error) {
    throw explained(error, options, scope);
  }
}

async function webhookCommand(
  command: string,
  options: Options,
  scope: WebhookScope,
  webhooks: WebhooksService,
): Promise<unknown> {
  const endpoint = () => required(options, 'endpoint');
  switch (command) {
    case 'create': {
      if (options.enable || options.disable || options['all-profiles'])
        throw new UsageError(
          'webhook create takes --disabled (and --profiles), not --enable, --disable or --all-profiles',
        );
      const created = await webhooks.create(scope, {
        url: endpointUrl(options),
        event_types: eventTypes(options),
        ...(options.profiles !== undefined ? { profile_ids: profileIds(options) } : {}),
        ...(options.description !== undefined
          ? { description: description(options.description, false) }
          : {}),
        enabled: !options.disabled,
      });
      return { ...created, note: SECRET_NOTE };
    }
    case 'list': {
      const all = [];
      let cursor: string | undefined;
      do {
        const page = await webhooks.list(scope, { limit: 100, ...(cursor ? { cursor } : {}) });
        all.push(...page.items);
        cursor = page.next_cursor ?? undefined;
      } while (cursor);
      return all;
    }
    case 'show':
      return webhooks.read(scope, endpoint());
    case 'update': {
      if (options.disabled)
        throw new UsageError('webhook update takes --enable or --disable, not --disabled');
      if (options.enable && options.disable) throw new UsageError('give --enable or --disable, not both');
      if (options.profiles !== undefined && options['all-profiles'])
        throw new UsageError('give --profiles or --all-profiles, not both');
      const changes = {
        ...(options.url !== undefined ? { url: endpointUrl(options) } : {}),
        ...(options.events !== undefined ? { event_types: eventTypes(options) } : {}),
        ...(options.profiles !== undefined ? { profile_ids: profileIds(options) } : {}),
        ...(options['all-profiles'] ? { profile_ids: null } : {}),
        ...(options.description !== undefined ? { description: description(options.description, true) } : {}),
        ...(options.enable || options.disable ? { enabled: Boolean(options.enable) } : {}),
      };
      if (Object.keys(changes).length === 0)
        throw new UsageError(
          'nothing to change: give --url, --events, --profiles, --all-profiles, --description, --enable or --disable',
        );
      return webhooks.update(scope, endpoint(), changes);
    }
    case 'delete':
      return webhooks.remove(scope, endpoint());
    case 'rotate':
      return { ...(await webhooks.rotate(scope, endpoint())), note: SECRET_NOTE };
    case 'test':
      return { ...(await webhooks.test(scope, endpoint())), note: QUEUED_NOTE };
    case 'deliveries': {
      const wanted = positiveLimit(options, 100);
      const status =
        options.status === undefined
          ? {}
          : { status: oneOf(options.status, ['pending', 'succeeded', 'failed'] as const, 'status') };
      const id = endpoint();
      const all = [];
      let cursor: string | undefined;
      do {
        const limit = Math.min(100, wanted - all.length);
        const page = await webhooks.deliveries(scope, id, {
          limit,
          ...status,
          ...(cursor ? { cursor } : {}),
        });
        all.push(...page.items);
        cursor = page.next_cursor ?? undefined;
      } while (cursor && all.length < wanted);
      return all;
    }
    case 'delivery':
      return webhooks.delivery(scope, endpoint(), required(options, 'delivery'));
    case 'redeliver': {
      const delivery = await webhooks.redeliver(scope, endpoint(), required(options, 'delivery'));
      return { ...delivery, note: QUEUED_NOTE };
    }
    default:
      throw new UsageError(`unknown command "webhook ${command}"`);
  }
}

async function run(command: string, options: Options, services: Services): Promise<unknown> {
  const { accounts, billing, prices } = services;
  if (command.startsWith('webhook ')) return webhook(command.slice('webhook '.length), options, services);
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
    case 'user-token-key rotate':
      return services.userTokens.rotate();
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
    case 'dashboard invite': {
      const accountId = required(options, 'account');
      if (!(await accounts.getAccount(accountId))) throw errors.notFound(`Account ${accountId}`);
      const { invite, token } = await services.dashboard.inviteOwner(accountId, required(options, 'email'));
      return { ...invite, url: `${services.settings.SVC_PUBLIC_URL}/dashboard/invitations/${token}` };
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
