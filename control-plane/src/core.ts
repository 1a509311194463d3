import type { Redis } from 'ioredis';
import type { DatabasePool, Interceptor } from 'slonik';
import { createRedis } from './adapters/redis.js';
import { commaSeparated } from './config/load.js';
import type { Settings } from './config/schema.js';
import { createDatabasePool } from './db/pool.js';
import { type AccountsService, createAccountsService } from './modules/accounts/service.js';
import { type BillingService, createBillingService } from './modules/billing/service.js';
import { createDashboardService, type DashboardService } from './modules/dashboard/service.js';
import { createUserTokens, type UserTokens } from './modules/users/service.js';
import { createWebhooksService, type WebhooksService } from './modules/webhooks/service.js';
import { type Accrual, createAccrual } from './platform/accrual.js';
import { createInvalidationBus, type InvalidationBus } from './platform/cache.js';
import { type Clock, systemClock } from './platform/clock.js';
import { type Cursors, createCursors } from './platform/cursors.js';
import { createIdempotency, type Idempotency } from './platform/idempotency.js';
import { type Liveness, startLiveness } from './platform/liveness.js';
import { createMetering, type Metering } from './platform/metering.js';
import { createOutbox, type Outbox } from './platform/outbox.js';
import { createPrices, type Prices, parseConfiguredPricing } from './platform/prices.js';
import { createSealer, type Sealer } from './platform/sealing.js';
import { createStanding, type Standing } from './platform/standing.js';

/**
 * Accounts, keys, prices and money: what the admin CLI needs, without the servers' clients (it starts
 * in a fraction of the time). The control plane's container is built on it.
 */
export interface Core {
  settings: Settings;
  clock: Clock;
  pool: DatabasePool;
  /**
   * Search's connections: each plans every statement for its values and keeps it parsed (search's
   * statements are long, and their best plan depends on the words), and search, the costliest read,
   * waits for its own connections rather than taking those that writes need.
   */
  searchPool: DatabasePool;
  redis: Redis;
  bus: InvalidationBus;
  prices: Prices;
  standing: Standing;
  metering: Metering;
  accrual: Accrual;
  idempotency: Idempotency;
  liveness: Liveness;
  outbox: Outbox;
  sealer: Sealer;
  cursors: Cursors;
  accounts: AccountsService;
  billing: BillingService;
  dashboard: DashboardService;
  webhooks: WebhooksService;
  userTokens: UserTokens;
  close(): Promise<void>;
}

/** Search's connections at most: a search runs its two statements at once on two of them. */
const SEARCH_POOL_SIZE = 10;

export interface CoreOptions {
  clock?: Clock;
  /** More slonik interceptors (tests count statements with one). */
  interceptors?: Interceptor[];
  /** Where failures of background notices (cache refreshes after a commit) are reported. */
  onError?: (error: unknown) => void;
}

export async function createCore(settings: Settings, options: CoreOptions = {}): Promise<Core> {
  const clock = options.clock ?? systemClock;
  const onError = options.onError ?? (() => {});
  const pool = await createDatabasePool(settings.SVC_DATABASE_URL, { interceptors: options.interceptors });
  const searchPool = await createDatabasePool(settings.SVC_DATABASE_URL, {
    interceptors: options.interceptors,
    maximumPoolSize: SEARCH_POOL_SIZE,
    plannedForItsValues: true,
  });
  const redis = createRedis(settings.SVC_REDIS_URL);
  const bus = createInvalidationBus(redis, onError);
  const { configured } = parseConfiguredPricing(settings.SVC_PRICES, settings.SVC_FREE_ALLOWANCES);
  const prices = createPrices({ pool, clock, configured, bus });
  const standing = createStanding({ pool, redis });
  const metering = createMetering({ pool, clock, prices, standing, onError });
  const outbox = createOutbox({ clock });
  const sealer = createSealer(settings.SVC_SEALING_KEY);
  const cursors = createCursors(settings.SVC_SEALING_KEY);
  const accounts = createAccountsService({ pool, clock, bus, onError });
  const liveness = await startLiveness(redis, onError);
  return {
    settings,
    clock,
    pool,
    searchPool,
    redis,
    bus,
    prices,
    standing,
    metering,
    accrual: createAccrual({ pool, redis, clock, metering, prices, onError }),
    idempotency: createIdempotency({ pool, clock, sealer, liveness }),
    liveness,
    outbox,
    sealer,
    cursors,
    accounts,
    userTokens: createUserTokens({
      pool,
      clock,
      sealer,
      bus,
      issuer: settings.SVC_PUBLIC_URL,
      principalOfKey: accounts.principalOfKey,
    }),
    billing: createBillingService({ pool, clock, prices, standing, outbox, cursors, onError }),
    dashboard: createDashboardService({ pool, redis, clock }),
    webhooks: createWebhooksService({
      pool,
      clock,
      sealer,
      outbox,
      bus,
      cursors,
      settings: {
        allowedNetworks: commaSeparated(settings.SVC_WEBHOOK_ALLOWED_NETWORKS),
        allowHttp: settings.SVC_WEBHOOK_ALLOW_HTTP,
      },
    }),
    close: async () => {
      bus.close();
      await liveness.stop();
      await Promise.all([pool.end(), searchPool.end()]);
      redis.disconnect();
    },
  };
}
