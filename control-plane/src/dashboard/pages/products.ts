import { bodyValidator } from '../../http/validation.js';
import type { AccountsService } from '../../modules/accounts/service.js';
import { AppSettingsPatch, MAX_ROOM_SIZE, MIN_ROOM_SIZE, PRODUCTS } from '../../modules/realtime/schema.js';
import type { RealtimeService } from '../../modules/realtime/service.js';
import { MAX_REPORT_DAYS } from '../../modules/shield/schema.js';
import type { ShieldService } from '../../modules/shield/service.js';
import type { StorageService } from '../../modules/storage/service.js';
import { when } from '../format.js';
import { html } from '../html.js';
import { appLink, confirmation, csrfField, emptyState, pager, postButton, shownOnce } from '../layout.js';
import { confirmed, field, fieldValues, intIn, pageQuery, pages } from '../pages.js';
import { appScopeOf } from './common.js';

const OBJECT_PAGE = 25;
/** A signed download URL opened from the dashboard works for five minutes. */
const OPEN_URL_SECONDS = 300;
const STATUSES = ['pending', 'ready'] as const;

/** An app's products: realtime settings and the shield secret, the shield report, storage objects. */
export function productPages(deps: {
  accounts: AccountsService;
  realtime: RealtimeService;
  shield: ShieldService;
  storage: StorageService;
}) {
  const validPatch = bodyValidator(AppSettingsPatch);
  const scopeOf = (ctx: Parameters<typeof appScopeOf>[1]) => appScopeOf(deps.accounts, ctx);

  return pages(
    {
      method: 'GET',
      url: '/dashboard/apps/:app/settings',
      access: 'read',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const settings = await deps.realtime.setup(scope);
        const canBuild = ctx.can('build');
        const off = canBuild ? '' : html` disabled`;
        return ctx.page(
          'Settings',
          html`${ctx.query.done === 'saved' ? html`<p class="notice" role="status">Settings saved; the chat server has them.</p>` : ''}
          <dl class="facts">
            <dt>Chat host</dt><dd><code>${settings.chat_host}</code></dd>
            <dt>Publishable key</dt><dd><code>${settings.publishable_key}</code></dd>
          </dl>
          <form method="post" action="/dashboard/apps/${app.id}/settings?mode=${mode}">${csrfField(ctx.csrf)}
            <fieldset><legend>Products</legend>
              ${PRODUCTS.map(
                (product) =>
                  html`<label><input type="checkbox" name="products" value="${product}"${settings.products.includes(product) ? html` checked` : ''}${off}> ${product}</label>`,
              )}</fieldset>
            <div class="field"><label><input type="checkbox" name="mam" value="on"${settings.mam ? html` checked` : ''}${off}>
              Message archive (MAM): the chat server keeps history clients can page through</label></div>
            <div class="field"><label for="max-room-size">Largest room</label>
              <input id="max-room-size" name="max_room_size" type="number" min="${MIN_ROOM_SIZE}" max="${MAX_ROOM_SIZE}"
                value="${settings.max_room_size}" required${off}></div>
            ${canBuild ? html`<div class="actions"><button type="submit">Save settings</button></div>` : ''}
          </form>
          <h2>Shield secret</h2>
          <p>Your server verifies shield tickets with it. Keep it server-side.</p>
          ${
            ctx.can('reveal_secrets')
              ? postButton(
                  `/dashboard/apps/${app.id}/settings/shield-secret?mode=${mode}`,
                  ctx.csrf,
                  'Reveal the shield secret',
                )
              : html`<p class="muted">Your role cannot see secrets.</p>`
          }`,
          { app, mode },
        );
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps/:app/settings',
      access: 'build',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const size = field(ctx.form, 'max_room_size');
        const change = validPatch({
          mam: field(ctx.form, 'mam') === 'on',
          products: fieldValues(ctx.form, 'products'),
          max_room_size: /^[0-9]{1,9}$/.test(size) ? Number(size) : size,
        });
        await deps.realtime.update(scope, change);
        return { redirect: appLink(app, '/settings', mode, '&done=saved') };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps/:app/settings/shield-secret',
      access: 'reveal_secrets',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const settings = await deps.realtime.setup(scope);
        return ctx.page(
          'Shield secret',
          shownOnce({
            warning: `Server-side only: anyone with it can forge shield tickets for this app (${mode}).`,
            id: 'shield-secret',
            value: settings.shield_secret,
            next: { href: appLink(app, '/settings', mode), label: 'Back to settings' },
          }),
          { app, mode },
        );
      },
    },
    {
      method: 'GET',
      url: '/dashboard/apps/:app/shield',
      access: 'read',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const days = intIn(ctx.query.days, 'days', 1, MAX_REPORT_DAYS, 7);
        const report = await deps.shield.report(scope, days);
        const total = Object.values(report.verdicts).reduce((sum, n) => sum + n, 0);
        return ctx.page(
          'Shield',
          html`<form method="get" action="${ctx.path}" class="inline-fields"><input type="hidden" name="mode" value="${mode}">
            <div class="field"><label for="shield-days">Days</label>
              <input id="shield-days" name="days" type="number" min="1" max="${MAX_REPORT_DAYS}" value="${days}"></div>
            <div class="actions"><button type="submit">Show</button></div></form>
          <div class="cards">${Object.entries(report.verdicts).map(
            ([verdict, count]) =>
              html`<div class="card"><p class="figure">${count}</p><p>${verdict}</p></div>`,
          )}</div>
          <h2>Busiest addresses</h2>
          ${
            report.busiest_addresses.length === 0
              ? emptyState(
                  total === 0
                    ? `No shield tickets in ${days} days. Clients ask for them with the publishable key (see the README's shield section).`
                    : 'No address stands out.',
                )
              : html`<div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">Busiest addresses (hashed)</caption>
              <thead><tr><th scope="col">Address (hashed)</th><th scope="col">Scope</th><th scope="col" class="num">Tickets</th><th scope="col" class="num">Viewers</th></tr></thead>
              <tbody>${report.busiest_addresses.map(
                (row) =>
                  html`<tr><td><code>${row.address}</code></td><td>${row.scope}</td><td class="num">${row.hits}</td><td class="num">${row.viewers}</td></tr>`,
              )}</tbody></table></div>`
          }`,
          { app, mode },
        );
      },
    },
    {
      method: 'GET',
      url: '/dashboard/apps/:app/storage',
      access: 'read',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const status = STATUSES.find((s) => s === ctx.query.status);
        const page = await deps.storage.list(scope, {
          ...pageQuery(ctx.query, OBJECT_PAGE),
          ...(status ? { status } : {}),
        });
        const canBuild = ctx.can('build');
        const base = `/dashboard/apps/${app.id}/storage`;
        return ctx.page(
          'Storage',
          html`${ctx.query.deleted ? html`<p class="notice" role="status">The object is deleted; links to it stop working.</p>` : ''}
          <form method="get" action="${base}" class="inline-fields"><input type="hidden" name="mode" value="${mode}">
            <div class="field"><label for="object-status">Status</label>
              <select id="object-status" name="status"><option value="">any</option>${STATUSES.map(
                (s) => html`<option value="${s}"${s === status ? html` selected` : ''}>${s}</option>`,
              )}</select></div>
            <div class="actions"><button type="submit">Filter</button></div></form>
          ${
            page.items.length === 0
              ? emptyState(
                  `No ${status ?? ''} ${mode} objects. Your server reserves uploads with POST /v1/storage/uploads.`,
                )
              : html`<div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">Storage objects, newest first</caption>
              <thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col" class="num">Bytes</th>
                <th scope="col">Status</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
              <tbody>${page.items.map(
                (
                  object,
                ) => html`<tr><td>${object.name}<br><span class="muted">${object.id}</span></td><td>${object.content_type}</td>
                  <td class="num">${object.size_bytes}</td><td>${object.status}</td><td>${when(new Date(object.created_at))}</td>
                  <td class="actions">${object.status === 'ready' ? html`<a href="${base}/${object.id}/open?mode=${mode}" target="_blank" rel="noopener">Open</a>` : ''}
                    ${canBuild ? postButton(`${base}/${object.id}/delete?mode=${mode}`, ctx.csrf, 'Delete…', { style: 'danger' }) : ''}</td></tr>`,
              )}</tbody></table></div>
              ${pager(base, { mode, ...(status ? { status } : {}) }, page.next_cursor)}`
          }`,
          { app, mode },
        );
      },
    },
    {
      method: 'GET',
      url: '/dashboard/apps/:app/storage/:object/open',
      access: 'read',
      handle: async (ctx) => {
        const { scope } = await scopeOf(ctx);
        const object = await deps.storage.read(scope, ctx.params.object!, {
          expires_in: OPEN_URL_SECONDS,
          download: false,
        });
        return { redirect: object.url };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps/:app/storage/:object/delete',
      access: 'build',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        if (!confirmed(ctx.form))
          return ctx.page(
            'Delete this object?',
            confirmation({
              action: `${ctx.path}?mode=${mode}`,
              csrf: ctx.csrf,
              warning: html`Its bytes and record go now, and every link already handed out stops working.`,
              confirm: 'Delete the object',
              keep: { href: appLink(app, '/storage', mode), label: 'Keep it' },
            }),
            { app, mode },
          );
        await deps.storage.remove(scope, ctx.params.object!);
        return { redirect: appLink(app, '/storage', mode, '&deleted=1') };
      },
    },
  );
}
