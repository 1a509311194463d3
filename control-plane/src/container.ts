import { createHmac } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { sql } from 'slonik';
import { createAiProvider } from './adapters/ai-provider.js';
import { createEjabberdClient, type EjabberdClient } from './adapters/ejabberd.js';
import { createLiveKitClient } from './adapters/livekit.js';
import { createMediaTools } from './adapters/media-tools.js';
import { createMessagingComponent } from './adapters/messaging-component.js';
import { type Probe, serverProbes } from './adapters/probes.js';
import { createObjectStore, type ObjectStore, type S3Settings } from './adapters/s3.js';
import { createWebhookSender } from './adapters/webhook-sender.js';
import { commaSeparated } from './config/load.js';
import type { Settings } from './config/schema.js';
import { type Core, type CoreOptions, createCore } from './core.js';
import { type AboutService, createAboutService } from './modules/about/service.js';
import { createInferenceQueue } from './modules/ai/queue.js';
import { type AiService, createAiService } from './modules/ai/service.js';
import { type ChatService, createChatService } from './modules/chat/service.js';
import { createLiveService, type LiveService } from './modules/live/service.js';
import { createMediaService, type MediaService } from './modules/media/service.js';
import { createMessagingService, type MessagingService } from './modules/messaging/service.js';
import { type BusinessesService, createBusinessesService } from './modules/orgs/businesses.js';
import { type CirclesService, createCirclesService } from './modules/orgs/circles.js';
import { createOrgsService, type OrgsService } from './modules/orgs/service.js';
import { createRealtimeService, type RealtimeService } from './modules/realtime/service.js';
import { createShieldService, type ShieldService } from './modules/shield/service.js';
import { createMomentsService, type MomentsService } from './modules/social/moments.js';
import { createSocialService, type SocialService } from './modules/social/service.js';
import { createStorageService, type StorageService } from './modules/storage/service.js';
import { createStudioService, type StudioService } from './modules/studio/service.js';
import {
  createWebhookDelivery,
  type DeliveryOptions,
  type WebhookDelivery,
} from './modules/webhooks/delivery.js';
import { DELIVERY_TIMEOUT_MS, RESPONSE_EXCERPT_BYTES } from './modules/webhooks/schema.js';
import { type Admission, createAdmission } from './platform/admission.js';
import { scopedNode } from './platform/identities.js';
import type { Logger } from './platform/route.js';
import { createSandbox } from './platform/sandbox.js';

/** Everything the app needs, built once from the settings. Tests may swap the clock. */
export interface Container extends Core {
  admission: Admission;
  ejabberd: EjabberdClient;
  realtime: RealtimeService;
  chat: ChatService;
  live: LiveService;
  storage: StorageService;
  media: MediaService;
  moments: MomentsService;
  studio: StudioService;
  shield: ShieldService;
  social: SocialService;
  about: AboutService;
  messaging: MessagingService;
  orgs: OrgsService;
  businesses: BusinessesService;
  circles: CirclesService;
  ai: AiService;
  objects: ObjectStore;
  webhookDelivery: WebhookDelivery;
  probes: Record<string, Probe>;
}

export interface ContainerOptions extends CoreOptions {
  /** Where the webhook worker logs (the app's logger; silent by default). */
  log?: Logger;
  /** The webhook worker's limits (tests set small ones). */
  delivery?: Partial<DeliveryOptions>;
}

const silent: Logger = { info: () => {}, warn: () => {}, error: () => {} };

const sqlSelectOne = sql.unsafe`select 1`;
/**
 * ffprobe and ffmpeg read a few headers and decode one frame: 20 s means a stalled read. Both tools
 * and the wait for a slot stay well inside the minute an Idempotency-Key is held for a request.
 */
const MEDIA_TOOL_TIMEOUT_MS = 20_000;
/** A publish waiting this long for ffmpeg finds the replica saturated (503; the client retries). */
const MEDIA_QUEUE_TIMEOUT_MS = 10_000;

/** The object store's settings, as the control plane is configured. */
export const objectStoreSettings = (settings: Settings): S3Settings => ({
  endpoint: settings.SVC_S3_ENDPOINT,
  publicEndpoint: settings.SVC_S3_PUBLIC_ENDPOINT,
  region: settings.SVC_S3_REGION,
  accessKey: settings.SVC_S3_ACCESS_KEY,
  secretKey: settings.SVC_S3_SECRET_KEY,
  bucket: settings.SVC_S3_BUCKET,
});

export async function createContainer(
  settings: Settings,
  options: ContainerOptions = {},
): Promise<Container> {
  const core = await createCore(settings, options);
  const { clock, pool, redis, bus, prices, standing, metering, accrual, accounts, outbox, sealer, cursors } =
    core;
  const onError = options.onError ?? (() => {});
  const ejabberd = createEjabberdClient({
    apiUrl: settings.SVC_EJABBERD_API_URL,
    apiSecret: settings.SVC_EJABBERD_API_SECRET,
    chatDomain: settings.SVC_CHAT_DOMAIN,
    mucDomain: settings.SVC_CHAT_MUC_DOMAIN,
  });
  // Realtime settings bring chat rooms to a new size; the chat service, made next, knows the rooms.
  let chat: ChatService | undefined;
  let circles: CirclesService | undefined;
  const realtime = createRealtimeService({
    pool,
    clock,
    accounts,
    ejabberd,
    bus,
    chatDomain: settings.SVC_CHAT_DOMAIN,
    // These modules are made later (they use this one): asked late.
    rooms: async (scope, chatPrefix) => [
      ...(await chat!.roomNames(scope)).map((room) => ({ node: scopedNode(chatPrefix, room), shape: {} })),
      ...(await orgs.teamRooms(scope, chatPrefix)),
      ...(await circles!.rooms(scope, chatPrefix)),
    ],
  });
  chat = createChatService({
    pool,
    redis,
    clock,
    ejabberd,
    realtime,
    metering,
    accrual,
    prices,
    standing,
    settings: {
      chatDomain: settings.SVC_CHAT_DOMAIN,
      mucDomain: settings.SVC_CHAT_MUC_DOMAIN,
      wsUrl: settings.SVC_CHAT_WS_URL,
    },
    // The orgs module is made later (it uses this one): asked late, like the realtime module's rooms.
    orgOfChatKey: (chatKey) => orgs.orgIdOfChatKey(chatKey),
  });
  const objects = createObjectStore(objectStoreSettings(settings));
  // Public-data products register their sandbox parts as they are made, profiles first.
  const sandbox = createSandbox({ pool, clock });
  // Storage takes down the media made from objects that expire; the media service, made next, reads
  // its files from storage.
  let media: MediaService | undefined;
  const storage = createStorageService({
    pool,
    clock,
    objects,
    metering,
    cursors,
    releaseMedia: (tx, objectIds) => media!.releaseObjects(tx, objectIds),
    onError,
  });
  media = createMediaService({
    pool,
    clock,
    objects,
    tools: createMediaTools({
      ffprobe: settings.SVC_FFPROBE_PATH,
      concurrency: availableParallelism(),
      timeoutMs: MEDIA_TOOL_TIMEOUT_MS,
      queueTimeoutMs: MEDIA_QUEUE_TIMEOUT_MS,
    }),
    accrual,
    storage,
    publicUrl: settings.SVC_PUBLIC_URL,
    redis,
    bytesPerAddressHour: settings.SVC_MEDIA_BYTES_PER_ADDRESS_HOUR,
    onError,
  });
  const social = createSocialService({
    pool,
    searchPool: core.searchPool,
    clock,
    outbox,
    cursors,
    sandbox,
  });
  const moments = createMomentsService({ pool, clock, outbox, cursors, social, media, sandbox });
  const studio = createStudioService({ pool, clock, cursors, media, sandbox });
  const about = createAboutService({ pool, clock, cursors, social, sandbox });
  const live = createLiveService({
    pool,
    redis,
    clock,
    livekit: createLiveKitClient({
      url: settings.SVC_LIVEKIT_URL,
      apiKey: settings.SVC_LIVEKIT_API_KEY,
      apiSecret: settings.SVC_LIVEKIT_API_SECRET,
    }),
    realtime,
    metering,
    prices,
    standing,
    publicUrl: settings.SVC_LIVEKIT_PUBLIC_URL,
    onError,
    // The orgs module is made later (it uses this one): asked late.
    orgMayCall: (orgId, identity) => orgs.mayCall(orgId, identity),
  });
  const orgs = createOrgsService({
    pool,
    clock,
    cursors,
    realtime,
    chat,
    live,
    billing: core.billing,
    ejabberd,
    chatDomain: settings.SVC_CHAT_DOMAIN,
  });
  const messaging = createMessagingService({
    pool,
    clock,
    outbox,
    cursors,
    accounts,
    realtime,
    social,
    onError,
    component: createMessagingComponent({
      url: settings.SVC_MESSAGING_COMPONENT_URL,
      domain: settings.SVC_MESSAGING_DOMAIN,
      secret: settings.SVC_MESSAGING_COMPONENT_SECRET,
      chatDomain: settings.SVC_CHAT_DOMAIN,
      onError,
    }),
    settings: {
      chatDomain: settings.SVC_CHAT_DOMAIN,
      codeKey: createHmac('sha256', settings.SVC_SEALING_KEY).update('svc otp codes v1').digest(),
    },
  });
  // Deliveries wait for the connection (and answer 503 past their wait): starting never blocks.
  void messaging.start();
  const businesses = createBusinessesService({
    pool,
    clock,
    cursors,
    orgs,
    realtime,
    messaging,
    social,
    ejabberd,
    chatDomain: settings.SVC_CHAT_DOMAIN,
    mucDomain: settings.SVC_CHAT_MUC_DOMAIN,
  });
  circles = createCirclesService({
    pool,
    clock,
    cursors,
    orgs,
    businesses,
    realtime,
    social,
    ejabberd,
    chatDomain: settings.SVC_CHAT_DOMAIN,
    mucDomain: settings.SVC_CHAT_MUC_DOMAIN,
  });
  const sender = createWebhookSender({
    timeoutMs: DELIVERY_TIMEOUT_MS,
    excerptBytes: RESPONSE_EXCERPT_BYTES,
    allowedNetworks: commaSeparated(settings.SVC_WEBHOOK_ALLOWED_NETWORKS),
    userAgent: 'svc-webhooks/1',
  });
  return {
    ...core,
    close: async () => {
      sender.close();
      await messaging.stop();
      await core.close();
    },
    webhookDelivery: createWebhookDelivery({
      pool,
      clock,
      sealer,
      sender,
      outbox,
      endpoints: core.webhooks,
      allowHttp: settings.SVC_WEBHOOK_ALLOW_HTTP,
      log: options.log ?? silent,
      ...(options.delivery ? { options: options.delivery } : {}),
    }),
    admission: createAdmission({ redis, clock, standing }),
    ejabberd,
    realtime,
    chat,
    live,
    objects,
    storage,
    media,
    social,
    moments,
    studio,
    about,
    messaging,
    orgs,
    businesses,
    circles,
    ai: createAiService({
      provider: createAiProvider({
        baseUrl: settings.SVC_AI_BASE_URL,
        moderationUrl: settings.SVC_AI_MODERATION_URL,
        apiKey: settings.SVC_AI_API_KEY,
        timeoutMs: settings.SVC_AI_TIMEOUT_MS,
      }),
      queue: createInferenceQueue({
        concurrency: settings.SVC_AI_CONCURRENCY,
        waiting: settings.SVC_AI_QUEUE,
        perApp: settings.SVC_AI_PER_APP,
      }),
      models: {
        generate: settings.SVC_AI_GENERATE_MODEL,
        chat: settings.SVC_AI_CHAT_MODEL,
        moderation: settings.SVC_AI_MODERATION_MODEL,
      },
    }),
    shield: createShieldService({ redis, clock, realtime, hashKey: settings.SVC_SHIELD_HASH_KEY }),
    probes: {
      postgres: async () => {
        await pool.query(sqlSelectOne);
      },
      redis: async () => {
        await redis.ping();
      },
      ...serverProbes({
        ejabberdStatus: ejabberd.status,
        livekitUrl: settings.SVC_LIVEKIT_URL,
        s3Endpoint: settings.SVC_S3_ENDPOINT,
      }),
    },
  };
}
