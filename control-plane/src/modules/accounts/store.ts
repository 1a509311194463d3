import { sql } from 'slonik';
import { z } from 'zod';
import type { KeyKind, KeyMode, Plan } from '../../platform/caller.js';
import type { Db } from '../../platform/transaction.js';
import { AccountRow, AppRow, KeyPrincipalRow, KeyRow } from './schema.js';

const accountColumns = sql.fragment`id, name, plan, daily_request_cap, balance_micros, created_at`;
const keyColumns = sql.fragment`id, app_id, kind, mode, token_hint, publishable_token, created_at, revoked_at, last_used_at`;

const principalSelect = sql.fragment`
  select k.id as key_id, k.token_hash, k.kind, k.mode, k.revoked_at,
         a.id as app_id, acc.id as account_id, acc.plan, acc.daily_request_cap
  from api_keys k
  join apps a on a.id = k.app_id
  join accounts acc on acc.id = a.account_id`;

/** SQL of accounts, apps and keys. Takes any connection, so a service can run it inside a transaction. */
export function accountsStore(db: Db) {
  return {
    insertAccount: (account: {
      id: string;
      name: string;
      plan: Plan;
      dailyRequestCap: number | null;
      at: Date;
    }) =>
      db.one(sql.type(AccountRow)`
        insert into accounts (id, name, plan, daily_request_cap, created_at)
        values (${account.id}, ${account.name}, ${account.plan}, ${account.dailyRequestCap},
                ${sql.timestamp(account.at)})
        returning ${accountColumns}`),

    findAccount: (id: string) =>
      db.maybeOne(sql.type(AccountRow)`select ${accountColumns} from accounts where id = ${id}`),

    listAccounts: () =>
      db.any(sql.type(AccountRow)`select ${accountColumns} from accounts order by created_at, id`),

    updatePlan: (id: string, plan: Plan, dailyRequestCap: number | null) =>
      db.maybeOne(sql.type(AccountRow)`
        update accounts set plan = ${plan}, daily_request_cap = ${dailyRequestCap}
        where id = ${id} returning ${accountColumns}`),

    insertApp: (app: { id: string; accountId: string; name: string; at: Date }) =>
      db.one(sql.type(AppRow)`
        insert into apps (id, account_id, name, created_at)
        values (${app.id}, ${app.accountId}, ${app.name}, ${sql.timestamp(app.at)})
        returning id, account_id, name, created_at`),

    findApp: (id: string) =>
      db.maybeOne(sql.type(AppRow)`select id, account_id, name, created_at from apps where id = ${id}`),

    listApps: (accountId: string) =>
      db.any(sql.type(AppRow)`
        select id, account_id, name, created_at from apps where account_id = ${accountId} order by created_at, id`),

    insertKey: (key: {
      id: string;
      appId: string;
      kind: KeyKind;
      mode: KeyMode;
      tokenHash: Buffer;
      tokenHint: string;
      publishableToken: string | null;
      at: Date;
    }) =>
      db.one(sql.type(KeyRow)`
        insert into api_keys (id, app_id, kind, mode, token_hash, token_hint, publishable_token, created_at)
        values (${key.id}, ${key.appId}, ${key.kind}, ${key.mode}, ${sql.binary(key.tokenHash)}, ${key.tokenHint},
                ${key.publishableToken}, ${sql.timestamp(key.at)})
        returning ${keyColumns}`),

    findKey: (id: string) =>
      db.maybeOne(sql.type(KeyRow)`select ${keyColumns} from api_keys where id = ${id}`),

    listKeys: (appId: string) =>
      db.any(
        sql.type(KeyRow)`select ${keyColumns} from api_keys where app_id = ${appId} order by created_at, id`,
      ),

    /** Revokes a key (once: a second revocation keeps the first time); its hash is for caches. */
    revokeKey: async (id: string, at: Date) => {
      const row = await db.maybeOne(sql.type(KeyRow.extend({ token_hash: z.instanceof(Buffer) }))`
        update api_keys set revoked_at = coalesce(revoked_at, ${sql.timestamp(at)})
        where id = ${id} returning ${keyColumns}, token_hash`);
      if (!row) return null;
      const { token_hash: tokenHash, ...key } = row;
      return { key, tokenHash };
    },

    /** Records a key's use; a concurrent or later record already there wins. */
    touchKey: (id: string, at: Date) =>
      db.query(sql.unsafe`
        update api_keys set last_used_at = ${sql.timestamp(at)}
        where id = ${id} and (last_used_at is null or last_used_at < ${sql.timestamp(at)})`),

    findPrincipalByTokenHash: (tokenHash: Buffer) =>
      db.maybeOne(sql.type(KeyPrincipalRow)`
        ${principalSelect} where k.token_hash = ${sql.binary(tokenHash)}`),

    findPrincipalByKeyId: (keyId: string) =>
      db.maybeOne(sql.type(KeyPrincipalRow)`${principalSelect} where k.id = ${keyId}`),
  };
}
