import type { Payer } from './caller.js';
import type { Usage } from './metering.js';

/** What one charge reports: its cost, and the balance it left (live keys that were charged). */
export interface Charged {
  charged_micros: number;
  balance_micros_after: number | null;
  version_after: number | null;
  crossed_zero: boolean;
}

/** The charge of `calls` identical calls at once (their usages' quantities times `calls`). */
export type ChargeRun = (
  payer: Payer,
  metered: readonly Required<Usage>[],
  conditional: boolean,
) => Promise<Charged>;

/** The most calls charged as one: a bound on what one refusal sends back to be charged one by one. */
export const MOST_CALLS_A_TURN = 256;

/** What `calls` calls of `metered` cost in full, each call's usage priced alone. */
const fullCostOfOne = (metered: readonly Required<Usage>[]) =>
  metered.reduce(
    (sum, usage) => sum + Math.floor((usage.quantity * usage.price.priceMicros) / usage.price.unitSize),
    0,
  );

/**
 * Splits what `calls` calls were charged together among them, in the order they came: the first ones
 * take what was left of the free allowance (cost 0), the others pay. The parts add up to `total`
 * exactly, so the costs the calls report add up to what the ledger took.
 */
export function splitCharge(total: number, calls: number, fullCost: number): number[] {
  const paying = fullCost > 0 ? Math.min(calls, Math.ceil(total / fullCost)) : total > 0 ? calls : 0;
  const free = calls - paying;
  return Array.from({ length: calls }, (_, i) => {
    if (i < free) return 0;
    const n = i - free;
    return Math.floor(((n + 1) * total) / paying) - Math.floor((n * total) / paying);
  });
}

const scaled = (metered: readonly Required<Usage>[], calls: number): Required<Usage>[] =>
  metered.map((usage) => ({ ...usage, quantity: usage.quantity * calls }));

/** The calls that charge alike: one payer, one list of usages at one price, one kind of debit. */
const turnKey = (payer: Payer, metered: readonly Required<Usage>[], conditional: boolean) =>
  [
    payer.accountId,
    payer.appId,
    payer.mode,
    payer.orgId ?? '',
    conditional,
    ...metered.flatMap((usage) => [
      usage.product,
      usage.metric,
      usage.quantity,
      usage.price.priceMicros,
      usage.price.unitSize,
      usage.price.allowance,
    ]),
  ].join('\t');

interface Waiting {
  resolve(charged: Charged): void;
  reject(error: unknown): void;
}

/**
 * Charges of calls that wrote nothing (a signed read URL), taken in turns per payer and usage: while
 * one charge is at PostgreSQL, the calls that come meanwhile wait and are then charged as one, in one
 * statement. A busy payer's reads cost PostgreSQL one locked update of its balance row per turn
 * instead of one per call, and a lone call goes at once, as before.
 *
 * Nothing of the exactness goes: each call is charged before it answers, the calls' costs add up to
 * what the ledger took, and when a turn's balance cannot pay for all of its calls (`isRefusal`), its
 * calls are charged again one by one, so that those the balance covers pass and the others are
 * refused, as if they had come alone.
 */
export function createChargeTurns(run: ChargeRun, isRefusal: (error: unknown) => boolean) {
  /** Per turn key: the calls waiting for the charge at PostgreSQL to end (present while one is). */
  const turns = new Map<string, Waiting[]>();

  async function chargeOneByOne(
    payer: Payer,
    metered: readonly Required<Usage>[],
    conditional: boolean,
    waiting: readonly Waiting[],
  ) {
    for (const call of waiting) {
      await run(payer, metered, conditional).then(call.resolve, call.reject);
    }
  }

  async function chargeTogether(
    payer: Payer,
    metered: readonly Required<Usage>[],
    conditional: boolean,
    waiting: readonly Waiting[],
  ) {
    if (waiting.length === 1) return chargeOneByOne(payer, metered, conditional, waiting);
    try {
      const charged = await run(payer, scaled(metered, waiting.length), conditional);
      const costs = splitCharge(charged.charged_micros, waiting.length, fullCostOfOne(metered));
      // One of them tells the balance's new standing; the others changed nothing more.
      for (const [i, call] of waiting.entries()) {
        call.resolve({
          ...charged,
          charged_micros: costs[i]!,
          crossed_zero: i === 0 && charged.crossed_zero,
        });
      }
    } catch (error) {
      if (isRefusal(error)) return chargeOneByOne(payer, metered, conditional, waiting);
      for (const call of waiting) call.reject(error);
    }
  }

  /** Runs turns while calls wait, then lets the next call of the key go at once. */
  async function takeTurns(
    key: string,
    payer: Payer,
    metered: readonly Required<Usage>[],
    conditional: boolean,
    first: Waiting,
  ) {
    let calls = [first];
    while (calls.length > 0) {
      await chargeTogether(payer, metered, conditional, calls);
      const waiting = turns.get(key)!;
      calls = waiting.splice(0, MOST_CALLS_A_TURN);
    }
    turns.delete(key);
  }

  return {
    /** Charges one call that wrote nothing, with the calls of the same kind that wait with it. */
    charge: (payer: Payer, metered: readonly Required<Usage>[], conditional: boolean): Promise<Charged> =>
      new Promise<Charged>((resolve, reject) => {
        const key = turnKey(payer, metered, conditional);
        const waiting = turns.get(key);
        if (waiting) {
          waiting.push({ resolve, reject });
          return;
        }
        turns.set(key, []);
        void takeTurns(key, payer, metered, conditional, { resolve, reject });
      }),
  };
}
