import { MAX_USAGE_DAYS } from '../../modules/billing/schema.js';
import type { BillingService } from '../../modules/billing/service.js';
import { errors } from '../../platform/errors.js';
import { parseUsd } from '../../platform/money.js';
import { usd, when } from '../format.js';
import { html, jsonData } from '../html.js';
import { csrfField, emptyState, pager } from '../layout.js';
import { field, intIn, pageQuery, pages } from '../pages.js';

const LEDGER_PAGE = 25;
const DAY_CHOICES = [1, 7, 30, 90] as const;

/** Every UTC day from `from` to `to`, both included. */
function daysBetween(from: string, to: string): string[] {
  const days: string[] = [];
  for (let at = Date.parse(`${from}T00:00:00Z`); at <= Date.parse(`${to}T00:00:00Z`); at += 86_400_000)
    days.push(new Date(at).toISOString().slice(0, 10));
  return days;
}

/** Usage and money: the usage report, the balance and its ledger, the low-balance threshold. */
export function moneyPages(deps: { billing: BillingService; defaultThresholdUsd: string }) {
  const { billing } = deps;
  return pages(
    {
      method: 'GET',
      url: '/dashboard/usage',
      access: 'read',
      handle: async (ctx) => {
        const mode = ctx.query.mode === 'test' ? 'test' : 'live';
        const days = intIn(ctx.query.days, 'days', 1, MAX_USAGE_DAYS, 30);
        const report = await billing.usageReport(ctx.member.account_id, mode, days);
        const dayList = daysBetween(report.from, report.to);
        const series = new Map<string, number[]>();
        for (const line of report.usage) {
          const label = `${line.product} · ${line.metric}`;
          if (!series.has(label))
            series.set(
              label,
              dayList.map(() => 0),
            );
          series.get(label)![dayList.indexOf(line.day)]! += line.cost_micros / 1e6;
        }
        const chart = { days: dayList, series: [...series].map(([label, values]) => ({ label, values })) };
        return ctx.page(
          'Usage',
          html`<form method="get" action="/dashboard/usage" class="inline-fields">
            <div class="field"><label for="usage-mode">Mode</label>
              <select id="usage-mode" name="mode">${(['live', 'test'] as const).map(
                (m) => html`<option value="${m}"${m === mode ? html` selected` : ''}>${m}</option>`,
              )}</select></div>
            <div class="field"><label for="usage-days">Days</label>
              <input id="usage-days" name="days" type="number" min="1" max="${MAX_USAGE_DAYS}" value="${days}" list="day-choices">
              <datalist id="day-choices">${DAY_CHOICES.map((d) => html`<option value="${d}"></option>`)}</datalist></div>
            <div class="actions"><button type="submit">Show</button></div>
          </form>
          <div class="cards">
            <div class="card"><p class="figure" id="usage-total">${usd(report.total.cost_micros)}</p>
              <p>${mode === 'live' ? 'charged' : 'test usage, never charged'}, ${report.from} to ${report.to} (UTC)</p></div>
          </div>
          ${
            report.usage.length === 0
              ? emptyState(
                  `No ${mode} usage in these ${days} days. Priced API calls with a ${mode} key show up here within seconds.`,
                )
              : html`<div id="usage-chart" role="img" aria-label="Cost per day by product and metric, ${report.from} to ${report.to}; the table below has the figures"></div>
            <script type="application/json" id="usage-chart-data">${jsonData(chart)}</script>
            <h2>By day, product and metric</h2>
            <div class="table-wrap" tabindex="0"><table id="usage-lines"><caption class="visually-hidden">Usage lines</caption>
              <thead><tr><th scope="col">Day</th><th scope="col">Product</th><th scope="col">Metric</th>
                <th scope="col" class="num">Quantity</th><th scope="col" class="num">Billable</th><th scope="col" class="num">Cost</th></tr></thead>
              <tbody>${report.usage.map(
                (line) => html`<tr><td>${line.day}</td><td>${line.product}</td><td>${line.metric}</td>
                  <td class="num">${line.quantity} ${line.unit}</td><td class="num">${line.billable_quantity}</td>
                  <td class="num">${usd(line.cost_micros)}</td></tr>`,
              )}</tbody></table></div>`
          }
          <h2>Free allowances this month</h2>
          <div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">Free monthly allowances (${mode})</caption>
            <thead><tr><th scope="col">Product</th><th scope="col">Metric</th><th scope="col" class="num">Included</th>
              <th scope="col" class="num">Used</th><th scope="col" class="num">Left</th></tr></thead>
            <tbody>${report.allowances.map(
              (
                a,
              ) => html`<tr><td>${a.product}</td><td>${a.metric}</td><td class="num">${a.included} ${a.unit}</td>
                <td class="num">${a.used}</td><td class="num">${a.remaining}</td></tr>`,
            )}</tbody></table></div>
          <h2>Prices</h2>
          <div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">Price table</caption>
            <thead><tr><th scope="col">Product</th><th scope="col">Metric</th><th scope="col" class="num">Price</th><th scope="col">What it counts</th></tr></thead>
            <tbody>${report.prices.prices.map(
              (
                p,
              ) => html`<tr><td>${p.product}</td><td>${p.metric}</td><td class="num">${usd(p.price_micros)} / ${p.unit}</td>
                <td>${p.description}</td></tr>`,
            )}</tbody></table></div>`,
        );
      },
    },
    {
      method: 'GET',
      url: '/dashboard/billing',
      access: 'read',
      handle: async (ctx) => {
        const accountId = ctx.member.account_id;
        const [balance, ledger, threshold] = await Promise.all([
          billing.getBalance(accountId),
          billing.ledger(accountId, pageQuery(ctx.query, LEDGER_PAGE)),
          billing.lowBalanceThreshold(accountId),
        ]);
        const canManage = ctx.can('manage_billing');
        return ctx.page(
          'Balance',
          html`${ctx.query.done === 'threshold' ? html`<p class="notice" role="status">The low-balance threshold is saved.</p>` : ''}
          <div class="cards">
            <div class="card"><p class="figure" id="balance">${usd(Math.max(0, balance.balance_micros))}</p><p>live balance</p></div>
            <div class="card"><p class="figure" id="owed">${usd(balance.owed_micros)}</p><p>owed${balance.owed_micros > 0 ? ': usage that ran past the balance, taken from the next top-up' : ''}</p></div>
          </div>
          <p class="notice">Top-ups are an operator action in a self-hosted bundle: the operator runs
          <code>npm run admin -- balance topup --account ${accountId} --amount-usd &lt;amount&gt; --reference &lt;payment id&gt;</code>.</p>
          <h2>Low-balance warning</h2>
          <p>A <code>balance.low</code> event goes to your live webhook endpoints when the balance falls under
          ${threshold === null ? html`the operator's default of ${usd(parseUsd(deps.defaultThresholdUsd))}` : html`<strong>${usd(threshold)}</strong>`}${threshold === 0 ? ' (turned off)' : ''}.</p>
          ${
            canManage
              ? html`<form method="post" action="/dashboard/billing/threshold" class="inline-fields">${csrfField(ctx.csrf)}
              <div class="field"><label for="threshold">Threshold in dollars</label>
                <input id="threshold" name="threshold" inputmode="decimal" value="${threshold === null ? '' : (threshold / 1e6).toString()}" aria-describedby="threshold-hint">
                <p class="hint" id="threshold-hint">0 turns the warning off; empty takes the operator's default.</p></div>
              <div class="actions"><button type="submit">Save threshold</button></div></form>`
              : ''
          }
          <h2>Ledger</h2>
          ${
            ledger.items.length === 0
              ? emptyState('No movements yet: the first top-up shows up here.')
              : html`<div class="table-wrap" tabindex="0"><table id="ledger"><caption class="visually-hidden">Ledger, newest first</caption>
            <thead><tr><th scope="col">When</th><th scope="col">Kind</th><th scope="col">Reference or day</th>
              <th scope="col" class="num">Amount</th><th scope="col" class="num">Balance after</th></tr></thead>
            <tbody>${ledger.items.map(
              (entry) => html`<tr><td>${when(new Date(entry.created_at))}</td><td>${entry.kind}</td>
                <td>${entry.kind === 'topup' ? entry.reference : `${entry.day} · ${entry.app_id}`}</td>
                <td class="num">${usd(entry.amount_micros)}</td><td class="num">${usd(Math.round(entry.balance_after_usd * 1e6))}</td></tr>`,
            )}</tbody></table></div>
            ${pager('/dashboard/billing', {}, ledger.next_cursor, 'Older movements')}`
          }`,
        );
      },
    },
    {
      method: 'POST',
      url: '/dashboard/billing/threshold',
      access: 'manage_billing',
      handle: async (ctx) => {
        const text = field(ctx.form, 'threshold').trim().replace(/^\$/, '');
        let micros: number | null = null;
        if (text !== '') {
          try {
            micros = parseUsd(text);
          } catch {
            throw errors.invalidField('body', 'threshold', 'must be an amount of dollars such as 5 or 12.50');
          }
        }
        await billing.setLowBalanceThreshold(ctx.member.account_id, micros);
        return { redirect: '/dashboard/billing?done=threshold' };
      },
    },
  );
}
