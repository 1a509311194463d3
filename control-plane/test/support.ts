import { randomInt } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:net';
import type { Interceptor } from 'slonik';
import { EJABBERD_OPERATOR_USER } from '../../infra/src/env-file.js';
import { stackPaths } from '../../infra/src/paths.js';
import { ensureSecrets } from '../../infra/src/secrets.js';
import { type App, buildApp } from '../src/app.js';
import { loadSettings } from '../src/config/load.js';
import type { Settings } from '../src/config/schema.js';
import { type Container, createContainer } from '../src/container.js';
import { createHttpMetrics } from '../src/http/metrics.js';
import type { DeliveryOptions } from '../src/modules/webhooks/delivery.js';
import type { KeyMode, Payer, Plan } from '../src/platform/caller.js';
import { type Clock, createManualClock, type ManualClock } from '../src/platform/clock.js';
import type { Usage } from '../src/platform/metering.js';
import type { Route } from '../src/platform/route.js';
import { inTransaction } from '../src/platform/transaction.js';

export interface TestContext {
  /** The public listener's app. */
  app: App;
  /** The internal listener's: the bundled servers' callbacks and /metrics. */
  internal: App;
  container: Container;
  clock: ManualClock;
  close(): Promise<void>;
}

export function testSettings(overrides: Partial<Settings> = {}): Settings {
  return { ...loadSettings(process.env), ...overrides };
}

/** A fresh app against the real test PostgreSQL and Redis, with a clock the test sets. */
export async function startTestApp(
  options: {
    settings?: Partial<Settings>;
    clock?: Clock;
    extraRoutes?: (app: App) => void;
    /** More declared operations, through the same pipeline as the API's. */
    routes?: (container: Container) => Route[];
    /** slonik interceptors (statement counting, error watching). */
    interceptors?: Interceptor[];
    /** Where the app's log lines (level info and up) go; by default nowhere unless TEST_LOG is set. */
    logStream?: { write(line: string): void };
    /** The webhook worker's limits. */
    delivery?: Partial<DeliveryOptions>;
  } = {},
): Promise<TestContext> {
  const clock = (options.clock as ManualClock | undefined) ?? createManualClock(new Date());
  const container = await createContainer(testSettings(options.settings), {
    clock,
    interceptors: options.interceptors ?? [],
    ...(options.delivery ? { delivery: options.delivery } : {}),
  });
  // TEST_LOG=1 shows the apps' error logs, for a failing test's 500s.
  const shared = {
    logger: options.logStream
      ? { level: 'info', stream: options.logStream }
      : process.env.TEST_LOG
        ? { level: 'error' }
        : (false as const),
    routes: options.routes?.(container) ?? [],
    metrics: createHttpMetrics(),
  };
  const app = await buildApp(container, shared);
  const internal = await buildApp(container, { ...shared, listener: 'internal' });
  options.extraRoutes?.(app);
  await Promise.all([app.ready(), internal.ready()]);
  return {
    app,
    internal,
    container,
    clock,
    close: async () => {
      await Promise.all([app.close(), internal.close()]);
      await container.close();
    },
  };
}

const YEAR_MS = 365 * 86_400_000;

/**
 * A clock years ahead, for tests that run webhook workers: the test stack's running control plane
 * (real time) sees their deliveries as not yet due, and they see its deliveries, and those of a
 * test file on another distance, as older than the retention, which no worker sends. So each
 * webhook test file takes a distance of its own, and decides alone which worker sends what.
 */
export const clockYearsAhead = (years: number) => createManualClock(new Date(Date.now() + years * YEAR_MS));

/** A loopback address of its own, so that per-address counters of parallel tests never meet. */
export function uniqueAddress(): string {
  return `127.${randomInt(1, 255)}.${randomInt(0, 256)}.${randomInt(1, 255)}`;
}

/** An account with one app and one secret key, made through the same service the admin CLI uses. */
export async function createCustomer(
  container: Container,
  options: { plan?: Plan; mode?: KeyMode; dailyRequestCap?: number; balanceMicros?: number } = {},
) {
  const account = await container.accounts.createAccount({
    name: 'Test customer',
    plan: options.plan ?? 'pro',
    dailyRequestCap: options.dailyRequestCap ?? null,
  });
  const app = await container.accounts.createApp({ accountId: account.id, name: 'test app' });
  const { key, token } = await container.accounts.createKey({
    appId: app.id,
    kind: 'secret',
    mode: options.mode ?? 'test',
  });
  if (options.balanceMicros) {
    await container.billing.topUp({
      accountId: account.id,
      amountMicros: options.balanceMicros,
      reference: 'opening',
    });
  }
  return { account, app, key, token };
}

/** A port the kernel says is free right now, for a process a test starts itself. */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** A keyed call through the app, as an integrator's server makes it, from an address of its own. */
export function callWithKey(
  app: App,
  token: string,
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: string,
  payload?: object,
) {
  return app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: uniqueAddress(),
    ...(payload ? { payload } : {}),
  });
}

/** Usage known afterwards (minutes, bytes…), metered and charged in full now, as a server callback would. */
export function meterNow(container: Container, payer: Payer, usages: Usage[]): Promise<number> {
  return inTransaction(container.pool, (tx) => container.metering.meter(tx, payer, usages));
}

/** Read once: the login benchmark registers hundreds of accounts. */
let operatorSecret: string | undefined;

/**
 * A command of ejabberd's HTTP API as the test stack's operator account, for what the control
 * plane's own account may not run (reading a room's options, registering bench accounts).
 */
/** The stack profile the tests drive: the test profile, or the one `npm test`'s scale stage names. */
export function stackProfile(): 'test' | 'scale' {
  return process.env.SVC_STACK_PROFILE === 'scale' ? 'scale' : 'test';
}

export async function ejabberdAsOperator(
  settings: Pick<Settings, 'SVC_EJABBERD_API_URL' | 'SVC_CHAT_DOMAIN'>,
  command: string,
  body: object,
): Promise<Response> {
  operatorSecret ??= ensureSecrets(stackPaths(stackProfile()).secretsFile).ejabberdOperatorSecret;
  const credential = Buffer.from(`${EJABBERD_OPERATOR_USER}@${settings.SVC_CHAT_DOMAIN}:${operatorSecret}`);
  return fetch(`${settings.SVC_EJABBERD_API_URL}/${command}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Basic ${credential.toString('base64')}` },
    body: JSON.stringify(body),
  });
}
