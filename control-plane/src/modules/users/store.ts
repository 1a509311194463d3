import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyMode } from '../../platform/caller.js';
import type { Db } from '../../platform/transaction.js';
import { SigningKeyRow } from './schema.js';

const keyColumns = sql.fragment`kid, public_jwk, private_key_sealed, created_at, signs_from, retired_at, published_until`;

/** SQL of the service's signing keys and of users' token generations. */
export function usersStore(db: Db) {
  return {
    /** Every key kept (a handful: rotations delete those no longer published), newest first. */
    keys: () =>
      db.any(sql.type(SigningKeyRow)`
        select ${keyColumns} from user_token_keys order by signs_from desc, kid desc`),

    /** Serialises rotations of every replica (held until the transaction ends). */
    lockRotation: () => db.query(sql.unsafe`select pg_advisory_xact_lock(hashtext('user_token_keys'))`),

    insertKey: (key: {
      kid: string;
      publicJwk: Record<string, string>;
      sealed: Buffer;
      at: Date;
      signsFrom: Date;
    }) =>
      db.query(sql.unsafe`
        insert into user_token_keys (kid, public_jwk, private_key_sealed, created_at, signs_from)
        values (${key.kid}, ${sql.jsonb(key.publicJwk)}, ${sql.binary(key.sealed)},
                ${sql.timestamp(key.at)}, ${sql.timestamp(key.signsFrom)})`),

    /** The keys a new one takes over from stop signing when it starts, and stay published a while. */
    retireAllBut: (kid: string, retiredAt: Date, publishedUntil: Date) =>
      db.query(sql.unsafe`
        update user_token_keys
        set retired_at = ${sql.timestamp(retiredAt)}, published_until = ${sql.timestamp(publishedUntil)}
        where kid <> ${kid} and retired_at is null`),

    deleteUnpublished: (at: Date) =>
      db.query(sql.unsafe`delete from user_token_keys where published_until <= ${sql.timestamp(at)}`),

    generation: async (appId: string, mode: KeyMode, userId: string) =>
      (await db.maybeOneFirst(sql.type(z.object({ generation: z.number() }))`
        select generation from user_token_generations
        where app_id = ${appId} and mode = ${mode} and user_id = ${userId}`)) ?? 0,

    bumpGeneration: (appId: string, mode: KeyMode, userId: string, at: Date) =>
      db.query(sql.unsafe`
        insert into user_token_generations (app_id, mode, user_id, generation, revoked_at)
        values (${appId}, ${mode}, ${userId}, 1, ${sql.timestamp(at)})
        on conflict (app_id, mode, user_id) do update
        set generation = user_token_generations.generation + 1, revoked_at = excluded.revoked_at`),
  };
}
