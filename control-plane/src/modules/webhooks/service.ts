import { isIP } from 'node:net';
import type { DatabasePool } from 'slonik';
import { allowList, isAllowedAddress } from '../../platform/addresses.js';
import { createSharedCache, type InvalidationBus } from '../../platform/cache.js';
import type { KeyMode } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import type { Cursors } from '../../platform/cursors.js';
import { errors } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Outbox } from '../../platform/outbox.js';
import { pruneInBatches } from '../../platform/pruning.js';
import type { Sealer } from '../../platform/sealing.js';
import { secretHint } from '../../platform/secrets.js';
import { inTransaction } from '../../platform/transaction.js';
import {
  type AttemptFailure,
  type AttemptRow,
  type DeliveryRow,
  type EndpointRow,
  EVENT_RETENTION_DAYS,
  MAX_ENDPOINTS,
  PURGE_DELETED_AFTER_MS,
} from './schema.js';
import { newSigningSecret } from './signatures.js';
import { type EndpointFields, type EndpointState, webhooksStore } from './store.js';

/** An app in one key mode: whose endpoints these are. */
export interface WebhookScope {
  appId: string;
  mode: KeyMode;
}

export interface WebhookSettings {
  /** CIDRs deliveries may reach although private (SVC_WEBHOOK_ALLOWED_NETWORKS). */
  allowedNetworks: string[];
  /** Test-mode endpoints may use http:// (SVC_WEBHOOK_ALLOW_HTTP). */
  allowHttp: boolean;
}

/** How long a worker may use what it read of an endpoint should an invalidation be lost. */
const ENDPOINT_STATE_TTL_MS = 1_000;

/** How many attempts a delivery read shows. */
const ATTEMPT_LOG_LENGTH = 100;

export function presentEndpoint(row: EndpointRow) {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    event_types: row.event_types,
    profile_ids: row.profile_ids,
    enabled: row.enabled,
    disabled_reason: row.disabled_reason === 'failing' ? ('failing' as const) : null,
    secret_hint: row.secret_hint,
    failing_since: row.failing_since?.toISOString() ?? null,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

const presentAttempt = (row: AttemptRow) => ({
  attempted_at: row.attempted_at.toISOString(),
  status_code: row.status_code,
  failure: row.failure as AttemptFailure | null,
  latency_ms: row.latency_ms,
  response_excerpt: row.response_excerpt,
});

const presentDelivery = (row: DeliveryRow, lastAttempt: AttemptRow | undefined) => ({
  id: row.id,
  event_id: row.event_id,
  event_type: row.event_type,
  status: row.status,
  attempts: row.attempt_count,
  next_attempt_at: row.status === 'pending' ? (row.next_attempt_at?.toISOString() ?? null) : null,
  created_at: row.created_at.toISOString(),
  last_attempt: lastAttempt ? presentAttempt(lastAttempt) : null,
});

/**
 * An app's webhook endpoints: registered, changed, rotated, tested, and their deliveries read and
 * sent again. The API (`/v1/webhooks…`), the admin CLI and the dashboard all use this service.
 */
export function createWebhooksService(deps: {
  pool: DatabasePool;
  clock: Clock;
  sealer: Sealer;
  outbox: Outbox;
  bus: InvalidationBus;
  cursors: Cursors;
  settings: WebhookSettings;
}) {
  const allowed = allowList(deps.settings.allowedNetworks);
  /**
   * What delivery workers read of an endpoint before each attempt. Every change invalidates it here and
   * on every replica, so a rotation reaches even deliveries already claimed; entries also expire.
   */
  const states = createSharedCache<EndpointState | null>({
    name: 'webhook-endpoints',
    ttlMs: ENDPOINT_STATE_TTL_MS,
    maxEntries: 10_000,
    bus: deps.bus,
  });

  /** A URL deliveries may go to (the address a name resolves to is checked at each delivery). */
  function checkUrl(text: string, mode: KeyMode): string {
    const refuse = (message: string) => errors.invalidField('body', 'url', message);
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw refuse('must be an absolute URL');
    }
    const plainHttpAllowed = mode === 'test' && deps.settings.allowHttp;
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && plainHttpAllowed)) {
      throw refuse(
        deps.settings.allowHttp
          ? 'must be https:// (plain http:// is allowed for test keys only)'
          : 'must be https://',
      );
    }
    if (url.username || url.password) throw refuse('must not carry a user name or password');
    if (url.hash) throw refuse('must not have a #fragment');
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) && !isAllowedAddress(host, allowed)) {
      throw refuse('points at a private, loopback, link-local or reserved address');
    }
    return url.toString();
  }

  async function endpointOf(scope: WebhookScope, id: string): Promise<EndpointRow> {
    const row = await webhooksStore(deps.pool).findEndpoint(id, scope.appId, scope.mode);
    if (!row) throw errors.notFound('Webhook endpoint');
    return row;
  }

  function sealedSecret(endpointId: string) {
    const secret = newSigningSecret();
    return { secret, sealed: deps.sealer.seal(secret, endpointId), hint: secretHint(secret) };
  }

  async function withLastAttempts(rows: readonly DeliveryRow[]) {
    const attempts = await webhooksStore(deps.pool).attempts(
      rows.map((row) => row.id),
      1,
    );
    const lastOf = new Map(attempts.map((attempt) => [attempt.delivery_id, attempt]));
    return (row: DeliveryRow) => presentDelivery(row, lastOf.get(row.id));
  }

  async function deliveryOf(scope: WebhookScope, endpointId: string, deliveryId: string) {
    await endpointOf(scope, endpointId);
    const row = await webhooksStore(deps.pool).findDelivery(deliveryId, endpointId);
    if (!row) throw errors.notFound('Delivery');
    const attempts = await webhooksStore(deps.pool).attempts([row.id], ATTEMPT_LOG_LENGTH);
    return { ...presentDelivery(row, attempts[0]), attempt_log: attempts.map(presentAttempt) };
  }

  return {
    create: async (
      scope: WebhookScope,
      input: {
        url: string;
        event_types: string[];
        profile_ids?: string[] | null;
        description?: string;
        enabled?: boolean;
      },
    ) => {
      const url = checkUrl(input.url, scope.mode);
      const id = newId('whe');
      const { secret, sealed, hint } = sealedSecret(id);
      const row = await inTransaction(deps.pool, async (tx) => {
        const store = webhooksStore(tx);
        await store.lockEndpoints(scope.appId, scope.mode);
        if ((await store.countEndpoints(scope.appId, scope.mode)) >= MAX_ENDPOINTS) {
          throw errors.forbidden(
            `An app has at most ${MAX_ENDPOINTS} webhook endpoints per key mode: delete one first`,
          );
        }
        return store.insertEndpoint({
          id,
          appId: scope.appId,
          mode: scope.mode,
          url,
          description: input.description ?? '',
          eventTypes: input.event_types,
          profileIds: input.profile_ids ?? null,
          enabled: input.enabled ?? true,
          secretSealed: sealed,
          secretHint: hint,
          at: deps.clock.now(),
        });
      });
      return { ...presentEndpoint(row), secret };
    },

    list: async (scope: WebhookScope, query: { limit: number; cursor?: string }) => {
      const rows = await webhooksStore(deps.pool).endpointPage({
        appId: scope.appId,
        mode: scope.mode,
        limit: query.limit + 1,
        ...(query.cursor ? { after: deps.cursors.decode(query.cursor) } : {}),
      });
      return deps.cursors.page(rows, query.limit, presentEndpoint);
    },

    read: async (scope: WebhookScope, id: string) => presentEndpoint(await endpointOf(scope, id)),

    update: async (
      scope: WebhookScope,
      id: string,
      input: {
        url?: string;
        event_types?: string[];
        profile_ids?: string[] | null;
        description?: string;
        enabled?: boolean;
      },
    ) => {
      const row = await endpointOf(scope, id);
      if (Object.keys(input).length === 0) return presentEndpoint(row);
      const fields: Partial<EndpointFields> = {
        url: input.url === undefined ? undefined : checkUrl(input.url, scope.mode),
        description: input.description,
        eventTypes: input.event_types,
        profileIds: input.profile_ids,
        enabled: input.enabled,
      };
      const updated = await webhooksStore(deps.pool).updateEndpoint(id, fields, deps.clock.now());
      if (!updated) throw errors.notFound('Webhook endpoint');
      await states.invalidate(id);
      return presentEndpoint(updated);
    },

    /**
     * Removes the endpoint: nothing more is sent to it, and it is gone from every answer at once; its
     * deliveries follow with the next purge (`purgeDeleted`).
     */
    remove: async (scope: WebhookScope, id: string) => {
      await endpointOf(scope, id);
      await webhooksStore(deps.pool).deleteEndpoint(id, deps.clock.now());
      await states.invalidate(id);
      return { ok: true as const, id };
    },

    /** A new signing secret, in force at once: the next attempt is signed with it, never the old one. */
    rotate: async (scope: WebhookScope, id: string) => {
      await endpointOf(scope, id);
      const { secret, sealed, hint } = sealedSecret(id);
      const row = await webhooksStore(deps.pool).replaceSecret(id, sealed, hint, deps.clock.now());
      if (!row) throw errors.notFound('Webhook endpoint');
      await states.invalidate(id);
      return { ...presentEndpoint(row), secret };
    },

    /** Sends a `ping` event to the endpoint (enabled or not) and answers its pending delivery. */
    test: async (scope: WebhookScope, id: string) => {
      await endpointOf(scope, id);
      const { deliveryIds } = await inTransaction(deps.pool, (tx) =>
        deps.outbox.ping(tx, scope.appId, scope.mode, id),
      );
      return deliveryOf(scope, id, deliveryIds[0]!);
    },

    deliveries: async (
      scope: WebhookScope,
      endpointId: string,
      query: { limit: number; cursor?: string; status?: 'pending' | 'succeeded' | 'failed' },
    ) => {
      await endpointOf(scope, endpointId);
      const rows = await webhooksStore(deps.pool).deliveryPage({
        endpointId,
        limit: query.limit + 1,
        ...(query.status ? { status: query.status } : {}),
        ...(query.cursor ? { after: deps.cursors.decode(query.cursor) } : {}),
      });
      return deps.cursors.page(rows, query.limit, await withLastAttempts(rows.slice(0, query.limit)));
    },

    delivery: deliveryOf,

    /** The endpoint's URL, secret and state as an attempt uses them (null once it is deleted). */
    endpointState: (endpointId: string) =>
      states.get(endpointId, () => webhooksStore(deps.pool).endpointState(endpointId)),

    /**
     * Deletes what endpoints deleted over `PURGE_DELETED_AFTER_MS` ago left, a batch of deliveries at a
     * time (with their attempts and queue rows), then the endpoints themselves; answers how many
     * deliveries went.
     */
    purgeDeleted: async () => {
      const store = webhooksStore(deps.pool);
      const deletedBefore = new Date(deps.clock.now().getTime() - PURGE_DELETED_AFTER_MS);
      const purged = await pruneInBatches((limit) => store.purgeDeletedDeliveries(deletedBefore, limit));
      await store.purgeDeletedEndpoints(deletedBefore);
      return purged;
    },

    /** Events past their retention go, with their deliveries and attempts. */
    pruneEvents: () => {
      const before = new Date(deps.clock.now().getTime() - EVENT_RETENTION_DAYS * 86_400_000);
      return pruneInBatches((limit) => webhooksStore(deps.pool).pruneEvents(before, limit));
    },

    /** Sends the same event again (same id and body), with a fresh retry schedule. */
    redeliver: async (scope: WebhookScope, endpointId: string, deliveryId: string) => {
      const delivery = await deliveryOf(scope, endpointId, deliveryId);
      if (delivery.status === 'pending') return delivery;
      await webhooksStore(deps.pool).redeliver(deliveryId, deps.clock.now());
      deps.outbox.announceDue();
      return deliveryOf(scope, endpointId, deliveryId);
    },
  };
}

export type WebhooksService = ReturnType<typeof createWebhooksService>;
