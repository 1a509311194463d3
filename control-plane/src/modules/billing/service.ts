import { type DatabasePool, sql } from 'slonik';
import type { Clock } from '../../lib/clock.js';
import { formatUsd } from '../../lib/money.js';
import { newId } from '../../lib/random.js';
import { LEDGER_WINDOW, type LedgerEntryRow } from './schema.js';
import { billingStore } from './store.js';

export class BillingError extends Error {
  override name = 'BillingError';
}

/** USD as a JSON number: exact to the micro-dollar because it is parsed from the formatted decimal. */
export const usdNumber = (micros: number) => Number(formatUsd(micros));

function presentEntry(entry: LedgerEntryRow) {
  return {
    id: entry.id,
    kind: entry.kind,
    amount_usd: usdNumber(entry.amount_micros),
    amount_micros: entry.amount_micros,
    balance_after_usd: usdNumber(entry.balance_after_micros),
    reference: entry.reference,
    created_at: entry.created_at.toISOString(),
  };
}

export function createBillingService(deps: { pool: DatabasePool; clock: Clock }) {
  return {
    /**
     * Adds money to an account. Idempotent on the caller's reference: a replay returns the first
     * entry and adds nothing, even when both run at once (the row lock serialises them).
     */
    topUp: async (input: { accountId: string; amountMicros: number; reference: string }) => {
      if (!Number.isSafeInteger(input.amountMicros) || input.amountMicros <= 0) {
        throw new BillingError('a top-up must be a positive whole number of micro-dollars');
      }
      if (input.reference.trim() === '') throw new BillingError('a top-up needs a reference');
      return deps.pool.transaction(async (tx) => {
        const store = billingStore(tx);
        if ((await store.lockBalance(input.accountId)) === null)
          throw new BillingError(`no account ${input.accountId}`);
        const earlier = await store.findTopUp(input.accountId, input.reference);
        if (earlier) {
          if (earlier.amount_micros !== input.amountMicros) {
            throw new BillingError(`reference ${input.reference} was already used for a different amount`);
          }
          return { entry: earlier, replayed: true };
        }
        const balance = await store.addToBalance(input.accountId, input.amountMicros);
        const entry = await store.insertEntry({
          id: newId('led'),
          account_id: input.accountId,
          kind: 'topup',
          amount_micros: input.amountMicros,
          reference: input.reference,
          balance_after_micros: balance,
          created_at: deps.clock.now(),
        });
        return { entry, replayed: false };
      });
    },

    /** The balance and its latest movements, read from one snapshot so that they agree. */
    getBalance: async (accountId: string) => {
      const { balance, entries } = await deps.pool.transaction(async (tx) => {
        await tx.query(sql.unsafe`set transaction isolation level repeatable read read only`);
        const store = billingStore(tx);
        return {
          balance: await store.readBalance(accountId),
          entries: await store.latestEntries(accountId, LEDGER_WINDOW),
        };
      });
      if (balance === null) throw new BillingError(`no account ${accountId}`);
      return {
        account_id: accountId,
        currency: 'usd' as const,
        balance_usd: usdNumber(balance),
        balance_micros: balance,
        ledger: entries.map(presentEntry),
      };
    },
  };
}

export type BillingService = ReturnType<typeof createBillingService>;
