import { type Static, Type } from '@sinclair/typebox';

const Url = (description: string) => Type.String({ format: 'uri', description });
const Secret = (description: string, minLength = 8) => Type.String({ minLength, description });

/**
 * Every setting of the control plane, read once at start from SVC_* environment variables.
 * Internal URLs are how the control plane reaches a server; public URLs are what it hands to clients.
 */
export const SettingsSchema = Type.Object({
  SVC_HOST: Type.String({ default: '127.0.0.1', description: 'Address the HTTP server listens on.' }),
  SVC_PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 8080, description: 'HTTP port.' }),
  SVC_PUBLIC_URL: Url('Base URL clients use to reach this API (shown in docs and banners).'),
  SVC_LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((level) => Type.Literal(level)),
    { default: 'info', description: 'pino log level.' },
  ),
  SVC_INTERNAL_HOST: Type.String({
    default: '127.0.0.1',
    description:
      "Address of the internal listener (the bundled servers' callbacks, /metrics): loopback or a private network, never published.",
  }),
  SVC_INTERNAL_PORT: Type.Integer({
    minimum: 1,
    maximum: 65535,
    default: 8081,
    description: 'Port of the internal listener.',
  }),
  SVC_TRUST_PROXY: Type.String({
    default: '',
    description: 'Comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For is trusted.',
  }),
  SVC_MEDIA_BYTES_PER_ADDRESS_HOUR: Type.Integer({
    minimum: 0,
    default: 10_000_000_000,
    description:
      'Bytes of keyless media (/media/…) one client address may download an hour, so a looping client cannot run up an app’s bandwidth; 0 turns it off.',
  }),
  SVC_FFPROBE_PATH: Type.String({
    minLength: 1,
    default: 'ffprobe',
    description:
      'The ffprobe that checks uploaded media: the stacks build a small one (infra/media/build-ffprobe.sh) that starts in milliseconds; Debian’s works too.',
  }),
  SVC_REQUEST_TIMEOUT_MS: Type.Integer({
    minimum: 1_000,
    default: 30_000,
    description: 'How long a client may take to send a whole request (headers within a third of it).',
  }),
  SVC_SHUTDOWN_GRACE_MS: Type.Integer({
    minimum: 0,
    default: 10_000,
    description: 'How long in-flight requests may run after SIGTERM.',
  }),
  SVC_PRICES: Type.String({
    default: '',
    description:
      'Price overrides in USD per unit, e.g. "ai.generate_calls=0.0025,bandwidth.gb=0.04" (the database overrides these).',
  }),
  SVC_FREE_ALLOWANCES: Type.String({
    default: '',
    description: 'Free monthly allowance overrides in priced units, e.g. "chat.monthly_active_users=500".',
  }),
  SVC_DATABASE_URL: Url('PostgreSQL connection URL.'),
  SVC_REDIS_URL: Url('Redis connection URL.'),
  SVC_EJABBERD_AUTH_SECRET: Secret("Bearer secret of ejabberd's login questions (internal listener).", 32),
  SVC_MINIO_WEBHOOK_SECRET: Secret("Bearer secret of MinIO's bucket events (internal listener).", 32),
  SVC_SHIELD_HASH_KEY: Secret("HMAC key of the shield's client-address hashes.", 32),
  SVC_EJABBERD_API_URL: Url('Internal URL of ejabberd mod_http_api, e.g. http://127.0.0.1:5281/api.'),
  SVC_EJABBERD_API_SECRET: Secret(
    "Password of the control plane's ejabberd API account (svc-api@<SVC_CHAT_DOMAIN>).",
    32,
  ),
  SVC_CHAT_WS_URL: Url('Public XMPP-over-WebSocket URL handed to clients.'),
  SVC_CHAT_DOMAIN: Type.String({
    minLength: 1,
    default: 'chat.local',
    description: 'XMPP domain (ejabberd host).',
  }),
  SVC_CHAT_MUC_DOMAIN: Type.String({
    minLength: 1,
    default: 'conference.chat.local',
    description: 'Multi-user chat service domain.',
  }),
  SVC_MESSAGING_COMPONENT_URL: Url(
    "ejabberd's external-component listener (XEP-0114), e.g. xmpp://127.0.0.1:5275: OTPs, promos and replies.",
  ),
  SVC_MESSAGING_COMPONENT_SECRET: Secret("The component's password on that listener.", 32),
  SVC_MESSAGING_DOMAIN: Type.String({
    minLength: 1,
    default: 'notify.chat.local',
    description:
      'The domain of the messaging identities (the component’s), e.g. <app prefix>.app@notify.chat.local.',
  }),
  SVC_LIVEKIT_URL: Url('Internal LiveKit HTTP URL (room service, health).'),
  SVC_LIVEKIT_PUBLIC_URL: Url('Public LiveKit WebSocket URL handed to clients.'),
  SVC_LIVEKIT_API_KEY: Type.String({ minLength: 3, description: 'LiveKit API key.' }),
  SVC_LIVEKIT_API_SECRET: Secret('LiveKit API secret.', 32),
  SVC_S3_ENDPOINT: Url('Internal S3 (MinIO) endpoint.'),
  SVC_S3_PUBLIC_ENDPOINT: Url('Public S3 endpoint that presigned URLs are signed for.'),
  SVC_S3_REGION: Type.String({ minLength: 1, default: 'us-east-1', description: 'S3 signing region.' }),
  SVC_S3_ACCESS_KEY: Type.String({ minLength: 3, description: 'S3 access key.' }),
  SVC_S3_SECRET_KEY: Secret('S3 secret key.'),
  SVC_S3_BUCKET: Type.String({
    minLength: 3,
    default: 'svc-objects',
    description: 'Bucket holding every object.',
  }),
  SVC_SEALING_KEY: Secret(
    "Key that seals what the service keeps but must not show again: webhook signing secrets, and answers kept for Idempotency-Key replays (changing it means rotating every webhook endpoint's secret).",
    32,
  ),
  SVC_WEBHOOK_ALLOWED_NETWORKS: Type.String({
    default: '',
    description:
      'Comma-separated CIDRs that webhook deliveries may reach although private, loopback or link-local (e.g. "10.0.0.0/8").',
  }),
  SVC_WEBHOOK_ALLOW_HTTP: Type.Boolean({
    default: false,
    description:
      'Lets test-mode webhook endpoints use plain http:// URLs (live endpoints are always https://).',
  }),
  SVC_AI_BASE_URL: Type.String({
    default: '',
    description:
      'The OpenAI-compatible AI provider, e.g. http://127.0.0.1:8080/v1 (its /chat/completions); empty: AI answers 503.',
  }),
  SVC_AI_MODERATION_URL: Type.String({
    default: '',
    description:
      'Where /moderations is served when not beside SVC_AI_BASE_URL (the bundled provider’s second port).',
  }),
  SVC_AI_API_KEY: Type.String({
    default: '',
    description: 'Bearer key of the AI provider, if it takes one.',
  }),
  SVC_AI_GENERATE_MODEL: Type.String({ default: 'smollm2-135m', description: 'Model of /v1/ai/generate.' }),
  SVC_AI_CHAT_MODEL: Type.String({ default: 'smollm2-135m', description: 'Model of /v1/ai/chat.' }),
  SVC_AI_MODERATION_MODEL: Type.String({
    default: 'profanity-check',
    description: 'Model of /v1/ai/moderate.',
  }),
  SVC_AI_TIMEOUT_MS: Type.Integer({
    minimum: 1_000,
    maximum: 600_000,
    default: 60_000,
    description:
      "How long the AI provider may stay silent (before an answer's first token, or between two; a moderation in all) before the call answers 503 (and is not charged); an answer takes ten times this at most.",
  }),
  SVC_AI_CONCURRENCY: Type.Integer({
    minimum: 1,
    maximum: 256,
    default: 2,
    description:
      'AI calls at the provider at once, per control-plane process (the bundled one generates 2 at once).',
  }),
  SVC_AI_QUEUE: Type.Integer({
    minimum: 0,
    maximum: 10_000,
    default: 16,
    description: 'AI calls waiting for their turn, per process; past it a call is 429.',
  }),
  SVC_AI_PER_APP: Type.Integer({
    minimum: 1,
    maximum: 10_000,
    default: 6,
    description: 'AI calls one app may have running and waiting, per process: its share of the provider.',
  }),
  SVC_BALANCE_LOW_USD: Type.String({
    default: '1',
    pattern: '^\\d{1,12}(\\.\\d{1,6})?$',
    description:
      'A live balance falling under this many USD emits balance.low to the apps of the account, unless an owner set the account its own threshold in the dashboard; 0 turns it off for the other accounts.',
  }),
});

export type Settings = Static<typeof SettingsSchema>;

/** Settings whose values must never be printed. */
export const SECRET_SETTINGS: ReadonlySet<keyof Settings> = new Set([
  'SVC_DATABASE_URL',
  'SVC_REDIS_URL',
  'SVC_EJABBERD_AUTH_SECRET',
  'SVC_MINIO_WEBHOOK_SECRET',
  'SVC_SHIELD_HASH_KEY',
  'SVC_EJABBERD_API_SECRET',
  'SVC_MESSAGING_COMPONENT_SECRET',
  'SVC_LIVEKIT_API_SECRET',
  'SVC_S3_SECRET_KEY',
  'SVC_SEALING_KEY',
  'SVC_AI_API_KEY',
]);
