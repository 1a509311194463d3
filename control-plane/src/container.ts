import type { Redis } from 'ioredis';
import { type DatabasePool, sql } from 'slonik';
import { createEjabberdClient, type EjabberdClient } from './adapters/ejabberd.js';
import { createLiveKitClient } from './adapters/livekit.js';
import { type Probe, serverProbes } from './adapters/probes.js';
import { createRedis } from './adapters/redis.js';
import { createObjectStore, type ObjectStore } from './adapters/s3.js';
import type { Settings } from './config/schema.js';
import { createDatabasePool } from './db/pool.js';
import { createRequestLimits, type RequestLimits } from './http/limits.js';
import { type Clock, systemClock } from './lib/clock.js';
import { type AccountsService, createAccountsService } from './modules/accounts/service.js';
import { type BillingService, createBillingService } from './modules/billing/service.js';
import { type ChatService, createChatService } from './modules/chat/service.js';
import { createLiveService, type LiveService } from './modules/live/service.js';
import {
  createPricingService,
  type PricingService,
  parseConfiguredPricing,
} from './modules/pricing/service.js';
import { createRealtimeService, type RealtimeService } from './modules/realtime/service.js';
import { createShieldService, type ShieldService } from './modules/shield/service.js';
import { createStorageService, type StorageService } from './modules/storage/service.js';

/** Everything the app needs, built once from the settings. Tests may swap the clock. */
export interface Container {
  settings: Settings;
  clock: Clock;
  pool: DatabasePool;
  redis: Redis;
  accounts: AccountsService;
  pricing: PricingService;
  billing: BillingService;
  ejabberd: EjabberdClient;
  realtime: RealtimeService;
  chat: ChatService;
  live: LiveService;
  storage: StorageService;
  shield: ShieldService;
  objects: ObjectStore;
  limits: RequestLimits;
  probes: Record<string, Probe>;
  close(): Promise<void>;
}

const sqlSelectOne = sql.unsafe`select 1`;

export async function createContainer(
  settings: Settings,
  options: { clock?: Clock } = {},
): Promise<Container> {
  const clock = options.clock ?? systemClock;
  const pool = await createDatabasePool(settings.SVC_DATABASE_URL);
  const redis = createRedis(settings.SVC_REDIS_URL);
  const { configured } = parseConfiguredPricing(settings.SVC_PRICES, settings.SVC_FREE_ALLOWANCES);
  const pricing = createPricingService({ pool, clock, configured });
  const accounts = createAccountsService({ pool, clock });
  const billing = createBillingService({ pool, clock, pricing });
  const ejabberd = createEjabberdClient({
    apiUrl: settings.SVC_EJABBERD_API_URL,
    chatDomain: settings.SVC_CHAT_DOMAIN,
    mucDomain: settings.SVC_CHAT_MUC_DOMAIN,
  });
  const realtime = createRealtimeService({
    pool,
    clock,
    accounts,
    ejabberd,
    chatDomain: settings.SVC_CHAT_DOMAIN,
  });
  const chat = createChatService({
    pool,
    redis,
    clock,
    ejabberd,
    realtime,
    billing,
    settings: {
      chatDomain: settings.SVC_CHAT_DOMAIN,
      mucDomain: settings.SVC_CHAT_MUC_DOMAIN,
      wsUrl: settings.SVC_CHAT_WS_URL,
    },
  });
  const live = createLiveService({
    pool,
    redis,
    clock,
    livekit: createLiveKitClient({
      url: settings.SVC_LIVEKIT_URL,
      apiKey: settings.SVC_LIVEKIT_API_KEY,
      apiSecret: settings.SVC_LIVEKIT_API_SECRET,
    }),
    accounts,
    realtime,
    billing,
    publicUrl: settings.SVC_LIVEKIT_PUBLIC_URL,
  });
  const objects = createObjectStore({
    endpoint: settings.SVC_S3_ENDPOINT,
    publicEndpoint: settings.SVC_S3_PUBLIC_ENDPOINT,
    region: settings.SVC_S3_REGION,
    accessKey: settings.SVC_S3_ACCESS_KEY,
    secretKey: settings.SVC_S3_SECRET_KEY,
    bucket: settings.SVC_S3_BUCKET,
  });
  return {
    settings,
    clock,
    pool,
    redis,
    accounts,
    pricing,
    billing,
    ejabberd,
    realtime,
    chat,
    live,
    objects,
    storage: createStorageService({ pool, clock, objects, billing }),
    shield: createShieldService({ redis, clock, realtime, hashKey: settings.SVC_INTERNAL_SECRET }),
    limits: createRequestLimits({ redis, clock }),
    probes: {
      postgres: async () => {
        await pool.query(sqlSelectOne);
      },
      redis: async () => {
        await redis.ping();
      },
      ...serverProbes({
        ejabberdApiUrl: settings.SVC_EJABBERD_API_URL,
        livekitUrl: settings.SVC_LIVEKIT_URL,
        s3Endpoint: settings.SVC_S3_ENDPOINT,
      }),
    },
    close: async () => {
      await pool.end();
      redis.disconnect();
    },
  };
}
