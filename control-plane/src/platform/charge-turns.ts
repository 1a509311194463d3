import type { Payer } from './caller.js';
import type { Usage } from './metering.js';

/** What one charge reports: its cost, and the balance it left (live keys that were charged). */
export interface Charged {
  charged_micros: number;
  balance_micros_after: number | null;
  version_after: number | null;
  crossed_zero: boolean;
}

/** One svc_meter statement: a payer's usages (one call's, or a turn's scaled) charged at once. */
export type ChargeRun = (
  payer: Payer,
  metered: readonly Required<Usage>[],
  conditional: boolean,
) => Promise<Charged>;

/** The most calls charged as one: a bound on what one refusal sends back to be charged one by one. */
export const MOST_CALLS_A_TURN = 256;

/** What one call of `metered` costs in full, in micro-dollars and their fractions. */
export const fullCostOfOne = (metered: readonly Required<Usage>[]) =>
  metered.reduce((sum, usage) => sum + (usage.quantity * usage.price.priceMicros) / usage.price.unitSize, 0);

/**
 * Splits what `calls` calls were charged together among them, in the order they came: the first ones
 * take what was left of the free allowance (cost 0), the others pay. The parts add up to `total`
 * exactly, so the costs the calls report add up to what the ledger took.
 */
export function splitCharge(total: number, calls: number, fullCost: number): number[] {
  // Whole calls at least paid for: a unit priced in fractions of a micro-dollar rounds the total down.
  const paying = fullCost > 0 ? Math.min(calls, Math.ceil(total / fullCost - 1e-9)) : total > 0 ? calls : 0;
  const free = calls - paying;
  return Array.from({ length: calls }, (_, i) => {
    if (i < free) return 0;
    const n = i - free;
    return Math.floor(((n + 1) * total) / paying) - Math.floor((n * total) / paying);
  });
}

/**
 * What each of a turn's charges reports: its share of the cost, and the balance the turn left. One of
 * them tells the balance's new standing; the others changed nothing more.
 */
export const sharesOf = (charged: Charged, calls: number, metered: readonly Required<Usage>[]): Charged[] =>
  splitCharge(charged.charged_micros, calls, fullCostOfOne(metered)).map((cost, i) => ({
    ...charged,
    charged_micros: cost,
    crossed_zero: i === 0 && charged.crossed_zero,
  }));

/** The usages of `calls` calls of `metered` at once. */
export const scaled = (metered: readonly Required<Usage>[], calls: number): Required<Usage>[] =>
  metered.map((usage) => ({ ...usage, quantity: usage.quantity * calls }));

/** One list of usages at one price: calls of one such list can be charged as one. */
export const usageKey = (metered: readonly Required<Usage>[]) =>
  metered
    .flatMap((usage) => [
      usage.product,
      usage.metric,
      usage.quantity,
      usage.price.priceMicros,
      usage.price.unitSize,
      usage.price.allowance,
    ])
    .join('\t');

/** One payer: the account, app, key mode and org its usage lines name. */
export const payerKey = (payer: Payer) =>
  [payer.accountId, payer.appId, payer.mode, payer.orgId ?? ''].join('\t');

interface Rejectable {
  reject(error: unknown): void;
}

/**
 * Calls taken in turns per key: a call runs at once while fewer than `lanes` turns of its key run;
 * the calls that come meanwhile wait and make the next turn together (up to `most`), so that a burst
 * costs a few turns instead of a turn a call. `runTurn` settles every call it is given; should it
 * throw, its calls are rejected with the error.
 */
export function takingTurns<T extends Rejectable>(
  runTurn: (calls: T[]) => Promise<void>,
  most: number,
  lanes = 1,
) {
  /** A key's calls waiting, and its turns running. */
  type KeyState = { waiting: T[]; running: number };
  /** Per key, present while one of its turns runs. */
  const keys = new Map<string, KeyState>();

  async function takeTurns(key: string, state: KeyState, first: T) {
    let calls = [first];
    while (calls.length > 0) {
      await runTurn(calls).catch((error: unknown) => {
        for (const call of calls) call.reject(error);
      });
      calls = state.waiting.splice(0, most);
    }
    state.running -= 1;
    if (state.running === 0) keys.delete(key);
  }

  return (key: string, call: T): void => {
    let state = keys.get(key);
    if (!state) {
      state = { waiting: [], running: 0 };
      keys.set(key, state);
    }
    if (state.running >= lanes) {
      state.waiting.push(call);
      return;
    }
    state.running += 1;
    void takeTurns(key, state, call);
  };
}

interface WaitingCharge extends Rejectable {
  payer: Payer;
  metered: readonly Required<Usage>[];
  conditional: boolean;
  resolve(charged: Charged): void;
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
  const turn = takingTurns<WaitingCharge>(async (calls) => {
    // A turn's calls share their payer, usages and kind of debit (the turn's key).
    const { payer, metered, conditional } = calls[0]!;
    if (calls.length > 1) {
      try {
        const charged = await run(payer, scaled(metered, calls.length), conditional);
        const shares = sharesOf(charged, calls.length, metered);
        for (const [i, call] of calls.entries()) call.resolve(shares[i]!);
        return;
      } catch (error) {
        if (!isRefusal(error)) throw error;
      }
    }
    for (const call of calls) await run(payer, metered, conditional).then(call.resolve, call.reject);
  }, MOST_CALLS_A_TURN);

  return {
    /** Charges one call that wrote nothing, with the calls of the same kind that wait with it. */
    charge: (payer: Payer, metered: readonly Required<Usage>[], conditional: boolean): Promise<Charged> =>
      new Promise<Charged>((resolve, reject) =>
        turn([payerKey(payer), conditional, usageKey(metered)].join('\t'), {
          payer,
          metered,
          conditional,
          resolve,
          reject,
        }),
      ),
  };
}
