import { bodyValidator } from '../../http/validation.js';
import type { AppRow } from '../../modules/accounts/schema.js';
import type { AccountsService } from '../../modules/accounts/service.js';
import { CreateEndpoint } from '../../modules/webhooks/schema.js';
import type { WebhooksService } from '../../modules/webhooks/service.js';
import type { KeyMode } from '../../platform/caller.js';
import { EVENT_TYPES } from '../../platform/outbox.js';
import { when } from '../format.js';
import { type Html, html } from '../html.js';
import { appLink, confirmation, csrfField, emptyState, pager, postButton, shownOnce } from '../layout.js';
import { confirmed, type Form, field, fieldValues, pageQuery, pages } from '../pages.js';
import { appScopeOf } from './common.js';

const PAGE_SIZE = 20;
const validCreate = bodyValidator(CreateEndpoint);

/** The textarea's profile ids: one per line or comma-separated; none means every profile. */
function profileIds(form: Form): string[] | null {
  const ids = field(form, 'profile_ids')
    .split(/[\n,]/)
    .map((id) => id.trim())
    .filter(Boolean);
  return ids.length === 0 ? null : ids;
}

/** The one-time view of a signing secret, at creation and after a rotation. */
const secretShown = (app: AppRow, mode: KeyMode, endpointId: string, secret: string, warning: string) =>
  shownOnce({
    warning,
    id: 'endpoint-secret',
    value: secret,
    next: { href: appLink(app, `/webhooks/${endpointId}`, mode), label: 'Done, to the endpoint' },
  });

/** Webhook endpoints: register, rotate, test, read deliveries, redeliver. */
export function webhookPages(deps: { accounts: AccountsService; webhooks: WebhooksService }) {
  const { accounts, webhooks } = deps;

  const scopeOf = (ctx: Parameters<typeof appScopeOf>[1]) => appScopeOf(accounts, ctx);

  const createForm = (app: AppRow, mode: KeyMode, csrf: string): Html => html`<h2>New endpoint</h2>
    <form method="post" action="/dashboard/apps/${app.id}/webhooks?mode=${mode}">${csrfField(csrf)}
      <div class="field"><label for="wh-url">URL</label>
        <input id="wh-url" name="url" type="url" required maxlength="2048" placeholder="https://example.com/hooks"
          aria-describedby="wh-url-hint">
        <p class="hint" id="wh-url-hint">HTTPS; ${mode} events only reach ${mode} endpoints.</p></div>
      <div class="field"><label for="wh-description">Description (optional)</label>
        <input id="wh-description" name="description" maxlength="256"></div>
      <fieldset><legend>Events</legend>
        ${EVENT_TYPES.map((type) => html`<label><input type="checkbox" name="event_types" value="${type}"> <code>${type}</code></label>`)}
      </fieldset>
      <div class="field"><label for="wh-profiles">Only these profiles (optional)</label>
        <textarea id="wh-profiles" name="profile_ids" rows="3" aria-describedby="wh-profiles-hint"></textarea>
        <p class="hint" id="wh-profiles-hint">App user ids, one per line, up to 100. Empty: every profile. Applies to the
        buzz, sip and follow events.</p></div>
      <div class="actions"><button type="submit">Register endpoint</button></div>
    </form>`;

  return pages(
    {
      method: 'GET',
      url: '/dashboard/apps/:app/webhooks',
      access: 'read',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const page = await webhooks.list(scope, pageQuery(ctx.query, PAGE_SIZE));
        const canBuild = ctx.can('build');
        return ctx.page(
          'Webhooks',
          html`${ctx.query.deleted ? html`<p class="notice" role="status">Endpoint <code>${ctx.query.deleted}</code> is deleted.</p>` : ''}
          <p class="muted">Signed events POSTed to your servers. Each endpoint has its own signing secret; deliveries
          carry <code>X-Svc-Signature</code>.</p>
          ${
            page.items.length === 0
              ? emptyState(
                  `No ${mode} endpoints yet.${canBuild ? ' Register one below, then press its test button.' : ''}`,
                )
              : html`<div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">${mode} webhook endpoints</caption>
            <thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">State</th><th scope="col">Secret</th></tr></thead>
            <tbody>${page.items.map(
              (
                endpoint,
              ) => html`<tr><td><a href="${appLink(app, `/webhooks/${endpoint.id}`, mode)}">${endpoint.url}</a>
                ${endpoint.description ? html`<br><span class="muted">${endpoint.description}</span>` : ''}</td>
                <td>${endpoint.event_types.join(', ')}</td>
                <td>${endpoint.enabled ? html`<span class="badge ok">enabled</span>` : html`<span class="badge bad">disabled${endpoint.disabled_reason ? ` (${endpoint.disabled_reason})` : ''}</span>`}</td>
                <td><code>${endpoint.secret_hint}</code></td></tr>`,
            )}</tbody></table></div>${pager(ctx.path, { mode }, page.next_cursor)}`
          }
          ${canBuild ? createForm(app, mode, ctx.csrf) : ''}`,
          { app, mode },
        );
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps/:app/webhooks',
      access: 'build',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const description = field(ctx.form, 'description').trim();
        const input = validCreate({
          url: field(ctx.form, 'url').trim(),
          event_types: fieldValues(ctx.form, 'event_types'),
          profile_ids: profileIds(ctx.form),
          ...(description ? { description } : {}),
        });
        const created = await webhooks.create(scope, input);
        return {
          status: 201,
          body: ctx.page(
            'Endpoint registered',
            secretShown(
              app,
              mode,
              created.id,
              created.secret,
              'Copy the signing secret now: it is shown only this once. Your server verifies every delivery with it.',
            ),
            { app, mode },
          ),
        };
      },
    },
    {
      method: 'GET',
      url: '/dashboard/apps/:app/webhooks/:endpoint',
      access: 'read',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const endpoint = await webhooks.read(scope, ctx.params.endpoint!);
        const deliveries = await webhooks.deliveries(scope, endpoint.id, pageQuery(ctx.query, PAGE_SIZE));
        const canBuild = ctx.can('build');
        const action = (verb: string) =>
          `/dashboard/apps/${app.id}/webhooks/${endpoint.id}/${verb}?mode=${mode}`;
        return ctx.page(
          'Webhook endpoint',
          html`${Object.hasOwn(NOTICES, ctx.query.done ?? '') ? html`<p class="notice" role="status">${NOTICES[ctx.query.done as keyof typeof NOTICES]}</p>` : ''}
          <dl class="facts">
            <dt>URL</dt><dd><code>${endpoint.url}</code></dd>
            <dt>Description</dt><dd>${endpoint.description || '—'}</dd>
            <dt>Events</dt><dd>${endpoint.event_types.join(', ')}</dd>
            <dt>Profiles</dt><dd>${endpoint.profile_ids?.join(', ') ?? 'every profile'}</dd>
            <dt>State</dt><dd>${endpoint.enabled ? 'enabled' : `disabled${endpoint.disabled_reason ? ` (${endpoint.disabled_reason})` : ''}`}${endpoint.failing_since ? `, failing since ${when(new Date(endpoint.failing_since))}` : ''}</dd>
            <dt>Signing secret</dt><dd><code>${endpoint.secret_hint}</code></dd>
          </dl>
          ${
            canBuild
              ? html`<div class="actions">
            ${postButton(action('test'), ctx.csrf, 'Send a test event')}
            ${postButton(action(endpoint.enabled ? 'disable' : 'enable'), ctx.csrf, endpoint.enabled ? 'Disable' : 'Enable')}
            ${postButton(action('rotate'), ctx.csrf, 'Rotate secret…')}
            ${postButton(action('delete'), ctx.csrf, 'Delete…', { style: 'danger' })}</div>`
              : ''
          }
          <h2>Deliveries</h2>
          ${
            deliveries.items.length === 0
              ? emptyState('Nothing sent yet. Press “Send a test event” to see a delivery here.')
              : html`<div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">Deliveries, newest first</caption>
            <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th>
              <th scope="col">Last answer</th><th scope="col" class="num">Latency</th><th scope="col">Response</th>
              ${canBuild ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
            <tbody>${deliveries.items.map((delivery) => {
              const last = delivery.last_attempt;
              return html`<tr class="delivery" data-status="${delivery.status}">
                <td><code>${delivery.event_type}</code><br><span class="muted">${delivery.event_id} · ${when(new Date(delivery.created_at))}</span></td>
                <td><span class="badge ${delivery.status === 'succeeded' ? 'ok' : delivery.status === 'failed' ? 'bad' : ''}">${delivery.status}</span></td>
                <td class="num">${delivery.attempts}</td>
                <td>${last ? (last.status_code ?? last.failure) : '—'}</td>
                <td class="num">${last ? `${last.latency_ms} ms` : '—'}</td>
                <td>${last?.response_excerpt ? html`<details><summary>excerpt</summary><pre>${last.response_excerpt}</pre></details>` : '—'}</td>
                ${canBuild ? html`<td>${delivery.status === 'pending' ? '' : postButton(action(`deliveries/${delivery.id}/redeliver`), ctx.csrf, 'Redeliver')}</td>` : ''}
              </tr>`;
            })}</tbody></table></div>${pager(ctx.path, { mode }, deliveries.next_cursor)}`
          }`,
          { app, mode },
        );
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps/:app/webhooks/:endpoint/test',
      access: 'build',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        await webhooks.test(scope, ctx.params.endpoint!);
        return { redirect: noticeLink(app, mode, ctx.params.endpoint!, 'tested') };
      },
    },
    ...(['enable', 'disable'] as const).map((verb) => ({
      method: 'POST' as const,
      url: `/dashboard/apps/:app/webhooks/:endpoint/${verb}`,
      access: 'build' as const,
      handle: async (ctx: Parameters<typeof scopeOf>[0]) => {
        const { app, mode, scope } = await scopeOf(ctx);
        await webhooks.update(scope, ctx.params.endpoint!, { enabled: verb === 'enable' });
        return { redirect: noticeLink(app, mode, ctx.params.endpoint!, `${verb}d`) };
      },
    })),
    {
      method: 'POST',
      url: '/dashboard/apps/:app/webhooks/:endpoint/rotate',
      access: 'build',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const endpoint = await webhooks.read(scope, ctx.params.endpoint!);
        if (!confirmed(ctx.form))
          return ctx.page(
            'Rotate the signing secret?',
            confirmation({
              action: `${ctx.path}?mode=${mode}`,
              csrf: ctx.csrf,
              warning: html`The current secret (<code>${endpoint.secret_hint}</code>) stops working the moment you
              confirm: every delivery from then on, retries included, is signed with the new one. Put the new secret on
              your server right away.`,
              confirm: 'Rotate now',
              keep: {
                href: appLink(app, `/webhooks/${endpoint.id}`, mode),
                label: 'Keep the current secret',
              },
            }),
            { app, mode },
          );
        const rotated = await webhooks.rotate(scope, endpoint.id);
        return ctx.page(
          'New signing secret',
          secretShown(
            app,
            mode,
            endpoint.id,
            rotated.secret,
            'The old secret has stopped working. Copy the new one now: it is shown only this once.',
          ),
          { app, mode },
        );
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps/:app/webhooks/:endpoint/delete',
      access: 'build',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        const endpoint = await webhooks.read(scope, ctx.params.endpoint!);
        if (!confirmed(ctx.form))
          return ctx.page(
            'Delete this endpoint?',
            confirmation({
              action: `${ctx.path}?mode=${mode}`,
              csrf: ctx.csrf,
              warning: html`Nothing more is sent to <code>${endpoint.url}</code>, and its deliveries, pending ones
              included, are deleted with it.`,
              confirm: 'Delete the endpoint',
              keep: { href: appLink(app, `/webhooks/${endpoint.id}`, mode), label: 'Keep it' },
            }),
            { app, mode },
          );
        await webhooks.remove(scope, endpoint.id);
        return { redirect: appLink(app, '/webhooks', mode, `&deleted=${endpoint.id}`) };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps/:app/webhooks/:endpoint/deliveries/:delivery/redeliver',
      access: 'build',
      handle: async (ctx) => {
        const { app, mode, scope } = await scopeOf(ctx);
        await webhooks.redeliver(scope, ctx.params.endpoint!, ctx.params.delivery!);
        return { redirect: noticeLink(app, mode, ctx.params.endpoint!, 'redelivered') };
      },
    },
  );
}

/** What an endpoint's page says after an action (a code in its link, never text from the link). */
const NOTICES = {
  tested: 'A test event is on its way: its delivery is below.',
  enabled: 'The endpoint is enabled.',
  disabled: 'The endpoint is disabled: new events skip it and its pending deliveries wait.',
  redelivered: 'The event is being sent again.',
};

const noticeLink = (app: AppRow, mode: KeyMode, endpointId: string, notice: keyof typeof NOTICES) =>
  appLink(app, `/webhooks/${endpointId}`, mode, `&done=${notice}`);
