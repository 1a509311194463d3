import type { DatabasePool } from 'slonik';
import type { EjabberdClient, RoomShape } from '../../adapters/ejabberd.js';
import { createSharedCache, type InvalidationBus } from '../../platform/cache.js';
import type { AppScope } from '../../platform/caller.js';
import type { Clock } from '../../platform/clock.js';
import { mapAtMost } from '../../platform/concurrency.js';
import { errors } from '../../platform/errors.js';
import { randomBase62 } from '../../platform/ids.js';
import { newSecret } from '../../platform/secrets.js';
import { inTransaction } from '../../platform/transaction.js';
import type { AccountsService } from '../accounts/service.js';
import { DEFAULT_SETTINGS, type Product, type RealtimeAppRow } from './schema.js';
import { realtimeStore } from './store.js';

/** Rooms are brought to new settings a few at a time, so a large app does not flood ejabberd. */
const ROOM_UPDATE_CONCURRENCY = 8;
/** Settings are read by every mint and login; a change reaches every replica through the bus. */
const SETTINGS_CACHE_TTL_MS = 60_000;
const SETTINGS_CACHE_ENTRIES = 50_000;
/** A PATCH that keeps losing the race to concurrent PATCHes of the same app gives up (409). */
const UPDATE_ATTEMPTS = 5;

export interface SettingsChange {
  mam?: boolean;
  products?: Product[];
  max_room_size?: number;
}

export function productDisabled(product: Product) {
  return errors.forbidden(
    `The ${product} product is switched off for this app (PATCH /v1/realtime/app)`,
    'PRODUCT_DISABLED',
  );
}

/** A lowercase prefix: ejabberd folds JID local parts to lowercase, so mixed case would collide. */
const newChatPrefix = () => randomBase62(10).toLowerCase();

export function createRealtimeService(deps: {
  pool: DatabasePool;
  clock: Clock;
  accounts: AccountsService;
  ejabberd: EjabberdClient;
  bus: InvalidationBus;
  chatDomain: string;
  /** The nodes of an app's chat rooms (its own and its orgs' team rooms), to bring them to a new size. */
  /** The app's rooms on the chat server, each with what it is made with besides its size. */
  rooms: (scope: AppScope, chatPrefix: string) => Promise<readonly { node: string; shape: RoomShape }[]>;
}) {
  const cache = createSharedCache<RealtimeAppRow | null>({
    name: 'realtime-settings',
    ttlMs: SETTINGS_CACHE_TTL_MS,
    maxEntries: SETTINGS_CACHE_ENTRIES,
    bus: deps.bus,
  });
  const scopeKey = (scope: AppScope) => `app:${scope.appId}:${scope.mode}`;
  const prefixKey = (prefix: string) => `prefix:${prefix}`;
  const forget = async (row: RealtimeAppRow) => {
    await cache.invalidate(scopeKey({ appId: row.app_id, mode: row.mode }));
    await cache.invalidate(prefixKey(row.chat_prefix));
  };

  function present(row: RealtimeAppRow) {
    return {
      app_id: row.app_id,
      publishable_key: row.publishable_token,
      mam: row.mam,
      products: row.products,
      max_room_size: row.max_room_size,
      chat_host: deps.chatDomain,
      shield_secret: row.shield_secret,
    };
  }

  /** Makes the app's settings for a mode with the defaults: once, however many replicas race. */
  async function create(scope: AppScope): Promise<RealtimeAppRow> {
    const row = await inTransaction(deps.pool, async (tx) => {
      const store = realtimeStore(tx);
      await store.lockSetup(scope.appId);
      const raced = await store.find(scope.appId, scope.mode);
      if (raced) return raced;
      const { key } = await deps.accounts.createKey(
        { appId: scope.appId, kind: 'publishable', mode: scope.mode },
        tx,
      );
      await store.insert({
        appId: scope.appId,
        mode: scope.mode,
        chatPrefix: newChatPrefix(),
        publishableKeyId: key.id,
        shieldSecret: newSecret('shs_'),
        mam: DEFAULT_SETTINGS.mam,
        products: DEFAULT_SETTINGS.products,
        maxRoomSize: DEFAULT_SETTINGS.maxRoomSize,
        at: deps.clock.now(),
      });
      return (await store.find(scope.appId, scope.mode))!;
    });
    // Forgotten rather than kept as written: another replica's change heard before this line would
    // otherwise be overwritten with this older row until the entry expires.
    await forget(row);
    return row;
  }

  /** The app's settings for the caller's mode (from the cache), made on first use with the defaults. */
  async function ensure(scope: AppScope): Promise<RealtimeAppRow> {
    const cached = await cache.get(scopeKey(scope), () =>
      realtimeStore(deps.pool).find(scope.appId, scope.mode),
    );
    return cached ?? create(scope);
  }

  /** Brings ejabberd to the new settings: the app's archiving flag, and the size of every room. */
  async function push(current: RealtimeAppRow, next: { mam: boolean; maxRoomSize: number }, scope: AppScope) {
    if (next.mam !== current.mam) await deps.ejabberd.setArchiving(current.chat_prefix, next.mam);
    if (next.maxRoomSize !== current.max_room_size) {
      const rooms = await deps.rooms(scope, current.chat_prefix);
      const missing = new Set(
        await deps.ejabberd.setRoomsMaxUsers(
          rooms.map((room) => room.node),
          next.maxRoomSize,
        ),
      );
      // Rooms ejabberd lost (a restore of older data) are made again as they were made: a team's
      // room members-only still, never open to the whole org.
      await mapAtMost(
        rooms.filter((room) => missing.has(room.node)),
        ROOM_UPDATE_CONCURRENCY,
        (room) => deps.ejabberd.ensureRoom(room.node, { ...room.shape, maxUsers: next.maxRoomSize }),
      );
    }
  }

  return {
    ensure,

    setup: async (scope: AppScope) => present(await ensure(scope)),

    /** The settings, after checking that the product is switched on. */
    requireProduct: async (scope: AppScope, product: Product): Promise<RealtimeAppRow> => {
      const settings = await ensure(scope);
      if (!settings.products.includes(product)) throw productDisabled(product);
      return settings;
    },

    /** The settings of a chat prefix (a JID's or a room's), or null when no app has it. */
    findByChatPrefix: (prefix: string) =>
      cache.get(prefixKey(prefix), () => realtimeStore(deps.pool).findByPrefix(prefix)),

    /**
     * Changes the settings. ejabberd is brought to them first, holding no lock (inserts that
     * reference the app never wait for it); the change is then written only if the settings are
     * still those that were read, else it starts over from the newer ones, so that whatever order
     * concurrent changes arrive in, ejabberd ends with the settings the database keeps.
     */
    update: async (scope: AppScope, change: SettingsChange) => {
      const settings = await ensure(scope);
      // Nothing to change: no write, no call to ejabberd.
      if (Object.values(change).every((value) => value === undefined)) return present(settings);
      for (let attempt = 0; attempt < UPDATE_ATTEMPTS; attempt += 1) {
        const current = (await realtimeStore(deps.pool).find(scope.appId, scope.mode))!;
        const next = {
          mam: change.mam ?? current.mam,
          products: change.products ?? current.products,
          maxRoomSize: change.max_room_size ?? current.max_room_size,
        };
        await push(current, next, scope);
        const written = await realtimeStore(deps.pool).update(scope.appId, scope.mode, current.version, {
          ...next,
          at: deps.clock.now(),
        });
        if (written) {
          await forget(current);
          return present((await realtimeStore(deps.pool).find(scope.appId, scope.mode))!);
        }
      }
      throw errors.conflict('The settings kept changing under this request; try again');
    },
  };
}

export type RealtimeService = ReturnType<typeof createRealtimeService>;
