import { type DatabasePool, sql } from 'slonik';
import { z } from 'zod';
import type { EjabberdClient } from '../../adapters/ejabberd.js';
import { ApiError } from '../../http/errors.js';
import type { Clock } from '../../lib/clock.js';
import { randomBase62 } from '../../lib/random.js';
import { newSecret } from '../../lib/secrets.js';
import type { KeyMode } from '../accounts/schema.js';
import type { AccountsService } from '../accounts/service.js';
import { DEFAULT_SETTINGS, type Product, type RealtimeAppRow } from './schema.js';
import { realtimeStore } from './store.js';

/** Rooms are brought to new settings a few at a time, so a large app does not flood ejabberd. */
const ROOM_UPDATE_CONCURRENCY = 8;

export interface AppScope {
  appId: string;
  mode: KeyMode;
}

export interface SettingsChange {
  mam?: boolean;
  products?: Product[];
  max_room_size?: number;
}

export function productDisabled(product: Product): ApiError {
  return new ApiError(
    'permission_error',
    `The ${product} product is switched off for this app (PATCH /v1/realtime/app)`,
    {
      code: 'PRODUCT_DISABLED',
    },
  );
}

/** A lowercase prefix: ejabberd folds JID local parts to lowercase, so mixed case would collide. */
const newChatPrefix = () => randomBase62(10).toLowerCase();

export function createRealtimeService(deps: {
  pool: DatabasePool;
  clock: Clock;
  accounts: AccountsService;
  ejabberd: EjabberdClient;
  chatDomain: string;
}) {
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

  /** The app's settings for the caller's mode, made on first use with the defaults. */
  async function ensure(scope: AppScope): Promise<RealtimeAppRow> {
    const existing = await realtimeStore(deps.pool).find(scope.appId, scope.mode);
    if (existing) return existing;
    return deps.pool.transaction(async (tx) => {
      const store = realtimeStore(tx);
      await store.lockApp(scope.appId);
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

    findByChatPrefix: (prefix: string) => realtimeStore(deps.pool).findByPrefix(prefix),

    /**
     * Changes the settings. Archiving and room size reach ejabberd before the change commits: the
     * app's archiving flag (which covers its rooms too), and the size of every existing room.
     */
    update: async (scope: AppScope, change: SettingsChange) => {
      await ensure(scope);
      const updated = await deps.pool.transaction(async (tx) => {
        const store = realtimeStore(tx);
        await store.lockApp(scope.appId);
        const current = (await store.find(scope.appId, scope.mode))!;
        const next = {
          mam: change.mam ?? current.mam,
          products: change.products ?? current.products,
          maxRoomSize: change.max_room_size ?? current.max_room_size,
        };
        await store.update(scope.appId, scope.mode, { ...next, at: deps.clock.now() });
        if (next.mam !== current.mam) await deps.ejabberd.setArchiving(current.chat_prefix, next.mam);
        if (next.maxRoomSize !== current.max_room_size) {
          const rooms = await tx.anyFirst(
            sql.type(z.object({ room: z.string() }))`
              select room from chat_rooms where app_id = ${scope.appId} and mode = ${scope.mode} order by room`,
          );
          for (let i = 0; i < rooms.length; i += ROOM_UPDATE_CONCURRENCY) {
            await Promise.all(
              rooms
                .slice(i, i + ROOM_UPDATE_CONCURRENCY)
                .map((room) =>
                  deps.ejabberd.ensureRoom(`${current.chat_prefix}.${room}`, { maxUsers: next.maxRoomSize }),
                ),
            );
          }
        }
        return (await store.find(scope.appId, scope.mode))!;
      });
      return present(updated);
    },
  };
}

export type RealtimeService = ReturnType<typeof createRealtimeService>;
