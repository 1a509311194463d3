import { type DatabasePool, sql } from 'slonik';
import { z } from 'zod';
import { type OpenTransaction, openPoolTransaction, statement } from '../db/transaction.js';
import type { Payer } from './caller.js';
import {
  type Charged,
  createChargeTurns,
  payerKey,
  scaled,
  sharesOf,
  takingTurns,
  usageKey,
} from './charge-turns.js';
import { type Clock, utcDay } from './clock.js';
import { PaymentRequiredError, ServiceError } from './errors.js';
import { newId } from './ids.js';
import { inCodeUnitOrder } from './ordering.js';
import { metricKey, type Price } from './price-catalogue.js';
import { type Prices, type PriceTable, requireMetric } from './prices.js';
import type { Standing } from './standing.js';
import { leftNothing, sqlState, type Transaction, withAfterCommit } from './transaction.js';

/** One metered quantity, in the metric's base unit (calls, seconds, bytes, byte-days, users). */
export interface Usage {
  product: string;
  metric: string;
  quantity: number;
  /** The price it was used at, for usage accrued earlier; otherwise the table's price now. */
  price?: UsagePrice;
}

export type UsagePrice = Pick<Price, 'priceMicros' | 'unitSize' | 'allowance'>;

/** The SQLSTATE svc_meter raises when a balance cannot pay a priced call. */
const CANNOT_PAY = 'SV402';

const MeterResult = z.object({
  charged_micros: z.number().int(),
  balance_micros_after: z.number().int().nullable(),
  version_after: z.number().int().nullable(),
  crossed_zero: z.boolean(),
});

const PositionRow = z.object({
  account_id: z.string(),
  balance_micros: z.number().int(),
  product: z.string().nullable(),
  metric: z.string().nullable(),
  used: z.number().int().nullable(),
});

const cannotPay = (error: unknown) => sqlState(error) === CANNOT_PAY;

/**
 * The most calls whose works share a transaction: their statements take turns on its one connection,
 * so a bigger turn waits longer for its last one.
 */
const MOST_CALLS_TOGETHER = 64;
/**
 * Turns of one kind running at once, each on its own connection: while one commits (the charge and
 * the WAL flush), the next runs its works, where one turn at a time left PostgreSQL a single
 * connection to work on. Three or more made the turns smaller and cost more CPU a call than they
 * gained (docs/decisions.md).
 */
export const TURNS_AT_ONCE = 2;

export const insufficientBalance = () =>
  new PaymentRequiredError('Your prepaid balance cannot pay for this call; top up to continue');

/**
 * Prices usages, sums the quantities of each metric at each price and sorts them: every charge locks
 * the rows of its usages in one order.
 */
export function normaliseUsages(usages: readonly Usage[], table: PriceTable): Required<Usage>[] {
  const merged = new Map<string, Required<Usage>>();
  for (const usage of usages) {
    if (!Number.isSafeInteger(usage.quantity) || usage.quantity < 0) {
      throw new ServiceError('api_error', 'usage is a whole number, 0 or more', {
        detail: `${usage.product}.${usage.metric} quantity ${usage.quantity}`,
      });
    }
    requireMetric(usage.product, usage.metric);
    const price = usage.price ?? table.get(metricKey(usage.product, usage.metric))!;
    const key = [metricKey(usage.product, usage.metric), price.priceMicros, price.unitSize].join(' ');
    const seen = merged.get(key);
    merged.set(key, { ...usage, price, quantity: (seen?.quantity ?? 0) + usage.quantity });
  }
  return [...merged.entries()]
    .sort(([a], [b]) => inCodeUnitOrder(a, b))
    .map(([, usage]) => usage)
    .filter((usage) => usage.quantity > 0);
}

const NOTHING_CHARGED: Charged = {
  charged_micros: 0,
  balance_micros_after: null,
  version_after: null,
  crossed_zero: false,
};

/** The notice svc_charge_at_commit raises inside COMMIT (migrations/0007_charge_at_commit.sql). */
const CHARGED_NOTICE = /^svc_charged (\d+) (-?\d+|-) (\d+|-) ([tf])$/;

/** Every charge a COMMIT reported, in the order of their `charges_at_commit` rows. */
function chargesFromNotices(notices: readonly { message: string }[]): Charged[] {
  return notices.flatMap((notice) => {
    const match = CHARGED_NOTICE.exec(notice.message);
    if (!match) return [];
    const [, cost, balance, version, crossed] = match;
    return [
      {
        charged_micros: Number(cost),
        balance_micros_after: balance === '-' ? null : Number(balance),
        version_after: version === '-' ? null : Number(version),
        crossed_zero: crossed === 't',
      },
    ];
  });
}

/** svc_meter's arguments after the payer's, in its order (also charges_at_commit's columns). */
function meterArguments(payer: Payer, metered: readonly Required<Usage>[], at: Date, day: string) {
  const texts = (pick: (usage: Required<Usage>) => string) => sql.array(metered.map(pick), 'text');
  const numbers = (pick: (usage: Required<Usage>) => number) => sql.array(metered.map(pick), 'int8');
  return sql.join(
    [
      payer.accountId,
      payer.appId,
      payer.mode,
      day,
      sql.timestamp(at),
      newId('led'),
      texts((usage) => usage.product),
      texts((usage) => usage.metric),
      numbers((usage) => usage.quantity),
      numbers((usage) => usage.price.priceMicros),
      numbers((usage) => usage.price.unitSize),
      numbers((usage) => usage.price.allowance),
    ],
    sql.fragment`, `,
  );
}

/**
 * The one way usage is metered and charged, always by the SQL function svc_meter: it takes the
 * account's row lock first (live keys; a test key takes an advisory lock of the account instead), then
 * the allowance and usage rows in metric order, then the app's usage line of the day. Test keys are
 * metered and priced the same way and never charged.
 */
export function createMetering(deps: {
  pool: DatabasePool;
  clock: Clock;
  prices: Prices;
  standing: Standing;
  onError?: (error: unknown) => void;
}) {
  const onError = deps.onError ?? (() => {});
  const meterQuery = (
    payer: Payer,
    metered: readonly Required<Usage>[],
    conditional: boolean,
    day?: string,
  ) => {
    const at = deps.clock.now();
    return sql.type(MeterResult)`
      select charged_micros, balance_micros_after, version_after, crossed_zero
      from svc_meter(${meterArguments(payer, metered, at, day ?? utcDay(at))}, ${conditional},
                     ${payer.orgId ?? ''})`;
  };

  const turns = createChargeTurns(
    (payer, metered, conditional) => deps.pool.one(meterQuery(payer, metered, conditional)),
    cannotPay,
  );

  /** A balance that went from funded to not (or back) is told to every replica's standing cache. */
  function recordStanding(payer: Payer, charged: Charged): (() => Promise<void>) | undefined {
    const { crossed_zero: crossed, balance_micros_after: balance, version_after: version } = charged;
    if (!crossed || balance === null || version === null) return undefined;
    return () => deps.standing.record(payer.accountId, balance, version);
  }

  /**
   * A payer's place in a transaction's lock order: by account, and an account's live payers before
   * its test ones ('live' sorts first: the account's row before its test lock), then app and org.
   */
  const lockOrderOf = (payer: Payer) =>
    [payer.accountId, payer.mode, payer.appId, payer.orgId ?? ''].join('\t');

  async function meterIn(tx: Transaction, payer: Payer, usages: readonly Usage[], day?: string) {
    const metered = normaliseUsages(usages, await deps.prices.table(tx));
    if (metered.length === 0) return 0;
    const charged = await tx.one(meterQuery(payer, metered, false, day));
    const record = recordStanding(payer, charged);
    if (record) tx.afterCommit(record);
    return charged.charged_micros;
  }

  /**
   * Charges priced calls whose work is done, one charge per payer (in account order, the lock order
   * of every transaction). One payer's work that wrote nothing is charged in one statement of its
   * own, with the calls of its kind that came while the last one ran (charge-turns.ts); work that
   * wrote is charged inside its COMMIT, so that the accounts' rows stay locked only for the charge
   * itself and the WAL flush, never for a round trip to this process.
   */
  async function chargeAndCommit(
    open: OpenTransaction,
    charges: readonly { payer: Payer; metered: readonly Required<Usage>[] }[],
    idempotencyKey: string | null,
    conditional: boolean,
  ): Promise<Charged[]> {
    // Several payers are charged in one COMMIT even when nothing else was written: one by one, some
    // could be charged before another is refused.
    if (!open.begun() && charges.length === 1) {
      await open.commit();
      const [{ payer, metered }] = charges as [(typeof charges)[number]];
      return [await turns.charge(payer, metered, conditional)];
    }
    const at = deps.clock.now();
    const rows = charges.map(
      ({ payer, metered }) =>
        sql.fragment`(${meterArguments(payer, metered, at, utcDay(at))}, ${idempotencyKey}, ${conditional})`,
    );
    await open.db.query(statement`
      insert into charges_at_commit (account_id, app_id, mode, day, at, ledger_id, products, metrics,
                                     quantities, prices, units, allowances, idempotency_key, conditional)
      values ${sql.join(rows, sql.fragment`, `)}`);
    const committed = await open.commit();
    const charged = chargesFromNotices(committed!.notices);
    if (charged.length !== charges.length)
      throw new Error(`the commit of ${charges.length} charges reported ${charged.length}`);
    return charged;
  }

  /** A priced call in a transaction of its own. */
  async function chargeAlone<T>(
    payer: Payer,
    metered: readonly Required<Usage>[],
    work: (tx: Transaction) => Promise<T>,
    idempotencyKey: string | null,
    inFull: boolean,
  ): Promise<{ result: T; costMicros: number }> {
    // The connection is taken with the work's first statement: work that writes nothing holds none.
    const open = openPoolTransaction(deps.pool);
    const { tx, runTasks } = withAfterCommit(open);
    let result: T;
    let charged: Charged;
    try {
      result = await work(tx);
      // A live key pays even for an empty usage list: svc_meter refuses an empty balance.
      if (metered.length > 0 || payer.mode === 'live') {
        [charged] = (await chargeAndCommit(open, [{ payer, metered }], idempotencyKey, !inFull)) as [Charged];
      } else {
        await open.commit();
        charged = NOTHING_CHARGED;
      }
    } catch (error) {
      await open.rollback();
      if (cannotPay(error)) throw insufficientBalance();
      throw error;
    } finally {
      await open.release();
    }
    await recordStanding(payer, charged)?.().catch(onError);
    await runTasks(onError);
    return { result, costMicros: charged.charged_micros };
  }

  interface TogetherCall {
    payer: Payer;
    /** Where its work starts in its turn (`charge`'s `together.order`). */
    order: string;
    metered: readonly Required<Usage>[];
    work: (tx: Transaction) => Promise<unknown>;
    resolve(charged: { result: unknown; costMicros: number }): void;
    reject(error: unknown): void;
  }

  const alone = (call: TogetherCall) =>
    chargeAlone(call.payer, call.metered, call.work, null, false).then(call.resolve, call.reject);

  /**
   * A work's handle on the shared transaction, which tells whether the work sent any statement and
   * settles `firstAnswered` when its first statement is answered.
   */
  function handleOn(open: OpenTransaction) {
    const { tx, runTasks } = withAfterCommit(open);
    let sent = false;
    let answered!: () => void;
    const firstAnswered = new Promise<void>((resolve) => {
      answered = resolve;
    });
    const counted = Object.fromEntries(
      Object.entries(tx).map(([name, method]) => [
        name,
        name === 'afterCommit'
          ? method
          : (...args: unknown[]) => {
              const result = (method as (...a: unknown[]) => unknown)(...args);
              if (!sent) void Promise.resolve(result).then(answered, answered);
              sent = true;
              return result;
            },
      ]),
    ) as unknown as Transaction;
    return { tx: counted, runTasks, sent: () => sent, firstAnswered };
  }

  /**
   * Runs a turn's works on its transaction in their `order`: the works of one caller start together,
   * those of the next caller once each of theirs has had its first statement answered (or has
   * ended). Every replica thus takes the rows a work's first statement locks (a user's profile) in
   * one order, and two turns cannot deadlock on them; the connection runs one statement at a time
   * anyway, so this costs only the gaps between callers.
   */
  async function runInOrder(calls: readonly TogetherCall[], handles: ReturnType<typeof handleOn>[]) {
    const works: Promise<unknown>[] = [];
    const order = calls.map((_, i) => i).sort((a, b) => inCodeUnitOrder(calls[a]!.order, calls[b]!.order));
    let firstAnswers: Promise<unknown>[] = [];
    for (const [n, i] of order.entries()) {
      const work = calls[i]!.work(handles[i]!.tx);
      works[i] = work;
      firstAnswers.push(Promise.race([handles[i]!.firstAnswered, work.catch(() => undefined)]));
      const next = order[n + 1];
      if (next !== undefined && calls[next]!.order !== calls[i]!.order) {
        await Promise.all(firstAnswers);
        firstAnswers = [];
      }
    }
    return Promise.allSettled(works);
  }

  /** The payers of a turn's calls in account order (the lock order), each with its calls' indexes. */
  function payersOf(calls: readonly TogetherCall[], indexes: readonly number[]) {
    const payers = new Map<string, { payer: Payer; members: number[] }>();
    for (const i of indexes) {
      const key = payerKey(calls[i]!.payer);
      const group = payers.get(key) ?? { payer: calls[i]!.payer, members: [] };
      group.members.push(i);
      payers.set(key, group);
    }
    return [...payers.values()].sort((a, b) => inCodeUnitOrder(a.payer.accountId, b.payer.accountId));
  }

  /**
   * A turn of priced calls declared `together`: their works run in one transaction and commit with one
   * charge per payer. A work that fails before sending any statement, or with an error marked
   * `wroteNothing`, fails alone. If a work fails otherwise after sending one, or PostgreSQL refuses
   * the turn (a balance that cannot pay, or any other error it answers with), the transaction is
   * rolled back and the calls run again alone, so each call's outcome is the one it would have had
   * alone. Only a turn whose outcome is unknown (the connection lost) fails all its calls.
   *
   * The turn ends with its COMMIT or ROLLBACK: the calls that run again alone, and the tasks and
   * answers of a committed turn, go on while the next turn runs.
   */
  async function chargeTogether(calls: TogetherCall[]): Promise<void> {
    if (calls.length === 1) return void alone(calls[0]!);
    const open = openPoolTransaction(deps.pool);
    const handles = calls.map(() => handleOn(open));
    const settled = await runInOrder(calls, handles);
    const kept: number[] = [];
    const rerunnable: number[] = [];
    let spoilt = false;
    for (const [i, each] of settled.entries()) {
      if (each.status === 'fulfilled') kept.push(i);
      else if (handles[i]!.sent() && !leftNothing(each.reason)) spoilt = true;
      else {
        // Its work left nothing in the transaction: it fails as it would have alone.
        calls[i]!.reject(each.reason);
        continue;
      }
      rerunnable.push(i);
    }
    // A turn's calls share their usages (the turn's key).
    const { metered } = calls[0]!;
    const payers = payersOf(calls, kept);
    let charged: Charged[] | undefined;
    try {
      if (spoilt || kept.length === 0) await open.rollback();
      else {
        const charges = payers.map(({ payer, members }) => ({
          payer,
          metered: scaled(metered, members.length),
        }));
        charged = await chargeAndCommit(open, charges, null, true);
      }
    } catch (error) {
      await open.rollback();
      if (sqlState(error) === undefined) {
        for (const i of rerunnable) calls[i]!.reject(error);
        return;
      }
    } finally {
      await open.release();
    }
    if (!charged) {
      for (const i of rerunnable) void alone(calls[i]!);
      return;
    }
    const answered = charged;
    void Promise.all(
      payers.map(async ({ payer, members }, p) => {
        await recordStanding(payer, answered[p]!)?.().catch(onError);
        const shares = sharesOf(answered[p]!, members.length, metered);
        await Promise.all(
          members.map(async (i, n) => {
            await handles[i]!.runTasks(onError);
            calls[i]!.resolve({
              result: (settled[i] as PromiseFulfilledResult<unknown>).value,
              costMicros: shares[n]!.charged_micros,
            });
          }),
        );
      }),
    );
  }

  const together = takingTurns(chargeTogether, MOST_CALLS_TOGETHER, TURNS_AT_ONCE);

  return {
    /**
     * A priced call: its work and its charge commit together, or neither does. A live balance at zero
     * or below, or one that does not cover the cost, refuses the call (402) and rolls the work back;
     * a failed call is not charged. Returns what the work returned and what the call cost.
     *
     * `idempotencyKey`: the payer's key whose answer the work kept in its transaction; the charge
     * writes its cost there, in the same COMMIT.
     *
     * `inFull`: the work cannot be taken back once done (a message handed to the chat server), so a
     * balance that does not cover it does not refuse it: it is charged in full, like usage after the
     * fact, and may go below zero. Only an empty balance, refused before the work began, stops it.
     *
     * `together`: live calls of the same usages are taken in turns (any payers; TURNS_AT_ONCE at a
     * time, and the calls that come meanwhile make the next): a turn's works share one transaction, and
     * each payer is charged once in its COMMIT. A turn in which a work fails or a balance cannot pay
     * is rolled back and its calls run again alone, so each call's outcome is the one it would have
     * had alone. Calls with an idempotency key, and calls charged in full, always go alone. `order`
     * (the caller) orders the works of a turn, so that rows their first statements lock are taken in
     * one order by every turn, of this replica or another.
     */
    charge: async <T>(
      payer: Payer,
      usages: readonly Usage[],
      work: (tx: Transaction) => Promise<T>,
      options: { idempotencyKey?: string | null; inFull?: boolean; together?: { order: string } } = {},
    ): Promise<{ result: T; costMicros: number }> => {
      const metered = normaliseUsages(usages, await deps.prices.table());
      const idempotencyKey = options.idempotencyKey ?? null;
      const inFull = options.inFull ?? false;
      // A kept answer takes its own call's cost, a charge in full is no turn's to refuse, and a test
      // key has no balance row to queue on.
      const ownTurn = !options.together || payer.mode !== 'live' || idempotencyKey !== null || inFull;
      if (ownTurn || metered.length === 0) return chargeAlone(payer, metered, work, idempotencyKey, inFull);
      return new Promise((resolve, reject) =>
        together(usageKey(metered), {
          payer,
          order: options.together!.order,
          metered,
          work,
          resolve: resolve as TogetherCall['resolve'],
          reject,
        }),
      );
    },

    /**
     * Usage known only after the fact (minutes, bandwidth, stored bytes, monthly active users), metered
     * in the caller's transaction and charged in full: a live balance may go below zero, and what is
     * owed is repaid by the next top-up. Nothing is forgiven. `day` (YYYY-MM-DD, default today) is
     * the UTC day the usage happened, for usage accrued earlier.
     */
    meter: (tx: Transaction, payer: Payer, usages: readonly Usage[], day?: string) =>
      meterIn(tx, payer, usages, day),

    /** Several payers' usage in one transaction, as `meter` does each, in the lock order. */
    meterAll: async (
      tx: Transaction,
      charges: readonly { payer: Payer; usages: readonly Usage[]; day?: string }[],
    ) => {
      const ordered = [...charges].sort((a, b) =>
        inCodeUnitOrder(lockOrderOf(a.payer), lockOrderOf(b.payer)),
      );
      for (const { payer, usages, day } of ordered) await meterIn(tx, payer, usages, day);
    },

    /** Live accounts' balances and the free allowances they used this month (metric key → base units). */
    positions: async (accountIds: readonly string[], at: Date) => {
      const rows = await deps.pool.any(sql.type(PositionRow)`
        select a.id as account_id, a.balance_micros, u.product, u.metric, u.used
        from accounts a
        left join allowance_usage u
          on u.account_id = a.id and u.mode = 'live' and u.month = ${`${utcDay(at).slice(0, 7)}-01`}
        where a.id = any(${sql.array(accountIds, 'text')})`);
      const positions = new Map<string, { balance: number; allowanceUsed: Map<string, number> }>();
      for (const row of rows) {
        const position = positions.get(row.account_id) ?? {
          balance: row.balance_micros,
          allowanceUsed: new Map(),
        };
        if (row.product && row.metric)
          position.allowanceUsed.set(metricKey(row.product, row.metric), row.used ?? 0);
        positions.set(row.account_id, position);
      }
      return positions;
    },
  };
}

export type Metering = ReturnType<typeof createMetering>;
