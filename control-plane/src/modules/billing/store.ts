import { type CommonQueryMethods, sql } from 'slonik';
import { z } from 'zod';
import { LedgerEntryRow } from './schema.js';

const ledgerColumns = sql.fragment`
  id, account_id, kind, amount_micros, reference, balance_after_micros, app_id, to_char(day, 'YYYY-MM-DD') as day,
  created_at, updated_at`;

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

    insertTopUp: (entry: {
      id: string;
      accountId: string;
      amountMicros: number;
      reference: string;
      balanceAfter: number;
      at: Date;
    }) =>
      db.one(sql.type(LedgerEntryRow)`
        insert into ledger_entries (id, account_id, kind, amount_micros, reference, balance_after_micros, created_at, updated_at)
        values (${entry.id}, ${entry.accountId}, 'topup', ${entry.amountMicros}, ${entry.reference},
                ${entry.balanceAfter}, ${sql.timestamp(entry.at)}, ${sql.timestamp(entry.at)})
        returning ${ledgerColumns}`),

    /** Takes money for a charge, only if the balance covers it all; null when it does not. */
    debit: (accountId: string, amountMicros: number) =>
      db.maybeOneFirst(
        sql.type(z.object({ balance_micros: z.number().int() }))`
          update accounts set balance_micros = balance_micros - ${amountMicros}
          where id = ${accountId} and balance_micros >= ${amountMicros} returning balance_micros`,
      ),

    /** Takes up to the amount, never below zero: for charges known only after the work (bandwidth). */
    debitAtMost: (accountId: string, amountMicros: number) =>
      db.one(
        sql.type(z.object({ taken: z.number().int(), balance_micros: z.number().int() }))`
          update accounts a set balance_micros = a.balance_micros - least(a.balance_micros, ${amountMicros})
          from (select balance_micros as before from accounts where id = ${accountId}) b
          where a.id = ${accountId}
          returning b.before - a.balance_micros as taken, a.balance_micros`,
      ),

    /** Adds a charge to the app's usage line of the day (one line per app per day). */
    addToUsageLine: (line: {
      id: string;
      accountId: string;
      appId: string;
      day: string;
      amountMicros: number;
      balanceAfter: number;
      at: Date;
    }) =>
      db.query(sql.unsafe`
        insert into ledger_entries (id, account_id, kind, amount_micros, balance_after_micros, app_id, day, created_at, updated_at)
        values (${line.id}, ${line.accountId}, 'usage', ${-line.amountMicros}, ${line.balanceAfter}, ${line.appId},
                ${line.day}, ${sql.timestamp(line.at)}, ${sql.timestamp(line.at)})
        on conflict (account_id, app_id, day) where kind = 'usage' do update
          set amount_micros = ledger_entries.amount_micros + excluded.amount_micros,
              balance_after_micros = excluded.balance_after_micros,
              updated_at = greatest(ledger_entries.updated_at, excluded.updated_at)`),

    latestEntries: (accountId: string, limit: number) =>
      db.any(sql.type(LedgerEntryRow)`
        select ${ledgerColumns} from ledger_entries where account_id = ${accountId}
        order by updated_at desc, id desc limit ${limit}`),

    /**
     * Uses up to `quantity` of a monthly allowance and returns how much of it was free. The row is
     * made first and then locked, so concurrent uses of one allowance take turns.
     */
    useAllowance: async (use: {
      accountId: string;
      mode: string;
      month: string;
      product: string;
      metric: string;
      quantity: number;
      allowance: number;
    }) => {
      await db.query(sql.unsafe`
        insert into allowance_usage (account_id, mode, month, product, metric, used)
        values (${use.accountId}, ${use.mode}, ${use.month}, ${use.product}, ${use.metric}, 0)
        on conflict do nothing`);
      const used = await db.oneFirst(
        sql.type(z.object({ used: z.number().int() }))`
          select used from allowance_usage
          where account_id = ${use.accountId} and mode = ${use.mode} and month = ${use.month}
            and product = ${use.product} and metric = ${use.metric}
          for update`,
      );
      const free = Math.max(0, Math.min(use.quantity, use.allowance - used));
      if (free > 0) {
        await db.query(sql.unsafe`
          update allowance_usage set used = used + ${free}
          where account_id = ${use.accountId} and mode = ${use.mode} and month = ${use.month}
            and product = ${use.product} and metric = ${use.metric}`);
      }
      return free;
    },

    allowanceUsed: (accountId: string, mode: string, month: string) =>
      db.any(
        sql.type(z.object({ product: z.string(), metric: z.string(), used: z.number().int() }))`
          select product, metric, used from allowance_usage
          where account_id = ${accountId} and mode = ${mode} and month = ${month}`,
      ),

    /**
     * Adds usage to its day row and returns what this addition costs: the row's cost is always
     * floor(billable * price / unit), so the sum of the additions of a day is exactly the day's cost.
     */
    addUsage: (usage: {
      accountId: string;
      appId: string;
      mode: string;
      day: string;
      product: string;
      metric: string;
      priceMicros: number;
      unitSize: number;
      quantity: number;
      billable: number;
      at: Date;
    }) =>
      db.oneFirst(
        sql.type(z.object({ added_cost: z.number().int() }))`
          insert into usage_daily as u (account_id, app_id, mode, day, product, metric, price_micros, unit_size,
                                        quantity, billable_quantity, cost_micros, updated_at)
          values (${usage.accountId}, ${usage.appId}, ${usage.mode}, ${usage.day}, ${usage.product}, ${usage.metric},
                  ${usage.priceMicros}, ${usage.unitSize}, ${usage.quantity}, ${usage.billable},
                  floor(${usage.billable}::numeric * ${usage.priceMicros} / ${usage.unitSize})::bigint,
                  ${sql.timestamp(usage.at)})
          on conflict (app_id, mode, day, product, metric, price_micros, unit_size) do update
            set quantity = u.quantity + excluded.quantity,
                billable_quantity = u.billable_quantity + excluded.billable_quantity,
                cost_micros = floor((u.billable_quantity + excluded.billable_quantity)::numeric * u.price_micros
                                    / u.unit_size)::bigint,
                updated_at = excluded.updated_at
          returning (u.cost_micros - floor((u.billable_quantity - ${usage.billable})::numeric * u.price_micros
                                           / u.unit_size))::bigint as added_cost`,
      ),

    usageByDay: (accountId: string, mode: string, fromDay: string) =>
      db.any(
        sql.type(
          z.object({
            day: z.string(),
            product: z.string(),
            metric: z.string(),
            quantity: z.number().int(),
            billable_quantity: z.number().int(),
            cost_micros: z.number().int(),
          }),
        )`
          select to_char(day, 'YYYY-MM-DD') as day, product, metric, sum(quantity)::bigint as quantity,
                 sum(billable_quantity)::bigint as billable_quantity, sum(cost_micros)::bigint as cost_micros
          from usage_daily
          where account_id = ${accountId} and mode = ${mode} and day >= ${fromDay}
          group by day, product, metric
          order by day desc, product, metric`,
      ),

    /** Records a chat user's first login of the month; false when they had already logged in. */
    addMonthlyActiveUser: async (user: {
      appId: string;
      mode: string;
      month: string;
      userId: string;
      at: Date;
    }) =>
      (await db.maybeOneFirst(
        sql.type(z.object({ added: z.boolean() }))`
          insert into chat_monthly_active_users (app_id, mode, month, user_id, first_login_at)
          values (${user.appId}, ${user.mode}, ${user.month}, ${user.userId}, ${sql.timestamp(user.at)})
          on conflict do nothing returning true as added`,
      )) === true,
  };
}
