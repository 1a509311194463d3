import { type CommonQueryMethods, sql } from 'slonik';
import { z } from 'zod';
import { LedgerEntryRow } from './schema.js';

const ledgerColumns = sql.fragment`id, account_id, kind, amount_micros, reference, balance_after_micros, created_at`;

/** SQL of balances and the append-only ledger. */
export function billingStore(db: CommonQueryMethods) {
  return {
    /** Locks the account row for the rest of the transaction: balance changes are serialised per account. */
    lockBalance: (accountId: string) =>
      db.maybeOneFirst(
        sql.type(z.object({ balance_micros: z.number().int() }))`
          select balance_micros from accounts where id = ${accountId} for update`,
      ),

    readBalance: (accountId: string) =>
      db.maybeOneFirst(
        sql.type(z.object({ balance_micros: z.number().int() }))`
          select balance_micros from accounts where id = ${accountId}`,
      ),

    addToBalance: (accountId: string, amountMicros: number) =>
      db.oneFirst(
        sql.type(z.object({ balance_micros: z.number().int() }))`
          update accounts set balance_micros = balance_micros + ${amountMicros}
          where id = ${accountId} returning balance_micros`,
      ),

    findTopUp: (accountId: string, reference: string) =>
      db.maybeOne(sql.type(LedgerEntryRow)`
        select ${ledgerColumns} from ledger_entries
        where account_id = ${accountId} and kind = 'topup' and reference = ${reference}`),

    insertEntry: (entry: Omit<LedgerEntryRow, 'created_at'> & { created_at: Date }) =>
      db.one(sql.type(LedgerEntryRow)`
        insert into ledger_entries (id, account_id, kind, amount_micros, reference, balance_after_micros, created_at)
        values (${entry.id}, ${entry.account_id}, ${entry.kind}, ${entry.amount_micros}, ${entry.reference},
                ${entry.balance_after_micros}, ${sql.timestamp(entry.created_at)})
        returning ${ledgerColumns}`),

    latestEntries: (accountId: string, limit: number) =>
      db.any(sql.type(LedgerEntryRow)`
        select ${ledgerColumns} from ledger_entries where account_id = ${accountId}
        order by created_at desc, id desc limit ${limit}`),
  };
}
