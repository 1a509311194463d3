import type { AccountsService } from '../../modules/accounts/service.js';
import type { OrgsService } from '../../modules/orgs/service.js';
import { KEY_KINDS, KEY_MODES } from '../../platform/caller.js';
import { errors } from '../../platform/errors.js';
import { when } from '../format.js';
import { html } from '../html.js';
import { appLink, confirmation, csrfField, emptyState, postButton, shownOnce } from '../layout.js';
import { confirmed, field, modeOf, oneOf, pages } from '../pages.js';
import { appOf } from './common.js';

const APP_NAME_MAX = 100;

/** Apps, their overview and their keys. */
export function appPages(deps: { accounts: AccountsService; orgs: OrgsService; publicUrl: string }) {
  const { accounts } = deps;
  return pages(
    {
      method: 'GET',
      url: '/dashboard/apps',
      access: 'read',
      handle: async (ctx) => {
        const [account, apps] = await Promise.all([
          accounts.getAccount(ctx.member.account_id),
          accounts.listApps(ctx.member.account_id),
        ]);
        const canBuild = ctx.can('build');
        return ctx.page(
          'Apps',
          html`<p class="muted">Account <code>${account!.id}</code> · ${account!.name} · plan <strong>${account!.plan}</strong></p>
          ${
            apps.length === 0
              ? emptyState(
                  canBuild
                    ? 'No apps yet. Create your first app below, then a test key for it.'
                    : 'No apps yet. A developer or owner of the account creates them.',
                )
              : html`<div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">Apps</caption>
                <thead><tr><th scope="col">Name</th><th scope="col">Id</th><th scope="col">Created</th></tr></thead>
                <tbody>${apps.map(
                  (app) => html`<tr><td><a href="/dashboard/apps/${app.id}">${app.name}</a></td>
                    <td><code>${app.id}</code></td><td>${when(app.created_at)}</td></tr>`,
                )}</tbody></table></div>`
          }
          ${
            canBuild
              ? html`<h2>New app</h2>
            <form method="post" action="/dashboard/apps" class="narrow">${csrfField(ctx.csrf)}
              <div class="field"><label for="app-name">Name</label>
                <input id="app-name" name="name" required maxlength="${APP_NAME_MAX}"></div>
              <div class="actions"><button type="submit">Create app</button></div>
            </form>`
              : ''
          }`,
        );
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps',
      access: 'build',
      handle: async (ctx) => {
        const name = field(ctx.form, 'name').trim();
        if (name.length === 0 || name.length > APP_NAME_MAX)
          throw errors.invalidField('body', 'name', `must be 1-${APP_NAME_MAX} characters`);
        const app = await accounts.createApp({ accountId: ctx.member.account_id, name });
        return { redirect: `/dashboard/apps/${app.id}/keys` };
      },
    },
    {
      method: 'GET',
      url: '/dashboard/apps/:app',
      access: 'read',
      handle: async (ctx) => {
        const app = await appOf(accounts, ctx.member, ctx.params.app!);
        const mode = modeOf(ctx.query);
        const [keys, counts] = await Promise.all([
          accounts.listKeys(app.id),
          deps.orgs.counts({ appId: app.id, mode }),
        ]);
        const active = keys.filter((key) => key.revoked_at === null && key.mode === mode);
        const card = (figure: number, label: string, href?: string) =>
          html`<div class="card"><p class="figure">${figure}</p><p>${href ? html`<a href="${href}">${label}</a>` : label}</p></div>`;
        return ctx.page(
          app.name,
          html`<p class="muted">App <code>${app.id}</code>, created ${when(app.created_at)}. Figures for <strong>${mode}</strong> mode.</p>
          <div class="cards">
            ${card(active.length, 'active keys', appLink(app, '/keys', mode))}
            ${card(counts.org, 'organisations')}
            ${card(counts.business, 'businesses')}
            ${card(counts.circle, 'circles')}
          </div>
          ${
            active.length === 0
              ? emptyState(
                  `This app has no ${mode} key yet: create one on the Keys page, then call the API with it.`,
                  html`<p><a href="${appLink(app, '/keys', mode)}">Go to Keys</a></p>`,
                )
              : ''
          }`,
          { app, mode },
        );
      },
    },
    {
      method: 'GET',
      url: '/dashboard/apps/:app/keys',
      access: 'read',
      handle: async (ctx) => {
        const app = await appOf(accounts, ctx.member, ctx.params.app!);
        const mode = modeOf(ctx.query);
        const keys = (await accounts.listKeys(app.id)).filter((key) => key.mode === mode).reverse();
        const canBuild = ctx.can('build');
        return ctx.page(
          'Keys',
          html`${ctx.query.revoked ? html`<p class="notice" role="status">Key <code>${ctx.query.revoked}</code> is revoked: the API refuses it from now on.</p>` : ''}
          <p class="muted">Secret keys (<code>svc_${mode}_…</code>) stay on your servers; publishable keys
          (<code>pk_${mode}_…</code>) may ship in client code and only ask for shield tickets. A secret is shown
          once, when it is created: keep it in your secret store. A lost key is revoked and replaced.</p>
          ${
            keys.length === 0
              ? emptyState(`No ${mode} keys yet.${canBuild ? ' Create one below.' : ''}`)
              : html`<div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">${mode} keys</caption>
              <thead><tr><th scope="col">Key</th><th scope="col">Kind</th><th scope="col">Created</th>
                <th scope="col">Last used</th><th scope="col">Status</th>${canBuild ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
              <tbody>${keys.map(
                (key) => html`<tr id="${key.id}">
                  <td><code>${key.publishable_token ?? key.token_hint}</code><br><span class="muted">${key.id}</span></td>
                  <td>${key.kind}</td><td>${when(key.created_at)}</td><td>${when(key.last_used_at)}</td>
                  <td>${key.revoked_at ? html`<span class="badge bad">revoked ${when(key.revoked_at)}</span>` : html`<span class="badge ok">active</span>`}</td>
                  ${
                    canBuild
                      ? html`<td>${key.revoked_at ? '' : postButton(`/dashboard/apps/${app.id}/keys/${key.id}/revoke?mode=${mode}`, ctx.csrf, 'Revoke…', { style: 'danger' })}</td>`
                      : ''
                  }</tr>`,
              )}</tbody></table></div>`
          }
          ${
            canBuild
              ? html`<h2>New key</h2>
          <form method="post" action="/dashboard/apps/${app.id}/keys" class="narrow">${csrfField(ctx.csrf)}
            <fieldset><legend>Kind</legend>
              <label><input type="radio" name="kind" value="secret" checked> Secret (server)</label>
              <label><input type="radio" name="kind" value="publishable"> Publishable (client)</label></fieldset>
            <fieldset><legend>Mode</legend>
              <label><input type="radio" name="mode" value="test"${mode === 'test' ? html` checked` : ''}> Test</label>
              <label><input type="radio" name="mode" value="live"${mode === 'live' ? html` checked` : ''}> Live</label></fieldset>
            <div class="actions"><button type="submit">Create key</button></div>
          </form>`
              : ''
          }`,
          { app, mode },
        );
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps/:app/keys',
      access: 'build',
      handle: async (ctx) => {
        const app = await appOf(accounts, ctx.member, ctx.params.app!);
        const kind = oneOf(ctx.form, 'kind', KEY_KINDS);
        const mode = oneOf(ctx.form, 'mode', KEY_MODES);
        const { key, token } = await accounts.createKey({ appId: app.id, kind, mode });
        return {
          status: 201,
          body: ctx.page(
            'Your new key',
            html`${shownOnce({
              warning:
                kind === 'secret'
                  ? 'Copy this secret key now: it is shown only this once. The dashboard keeps only its hash.'
                  : 'This publishable key is safe in client code; the Keys page keeps showing it.',
              id: 'new-key',
              value: token,
              next: { href: appLink(app, '/keys', mode), label: 'Done, back to keys' },
            })}
            <p class="muted">Key <code>${key.id}</code> · ${kind} · ${mode}. Try it:</p>
            <pre tabindex="0"><code>curl -H "Authorization: Bearer ${kind === 'secret' ? token : '<secret key>'}" ${deps.publicUrl}/v1/realtime/balance</code></pre>`,
            { app, mode },
          ),
        };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/apps/:app/keys/:key/revoke',
      access: 'build',
      handle: async (ctx) => {
        const app = await appOf(accounts, ctx.member, ctx.params.app!);
        const key = (await accounts.listKeys(app.id)).find((candidate) => candidate.id === ctx.params.key);
        if (!key) throw errors.notFound(`Key ${ctx.params.key}`);
        if (!confirmed(ctx.form))
          return ctx.page(
            'Revoke this key?',
            confirmation({
              action: ctx.path,
              csrf: ctx.csrf,
              warning: html`Every request with <code>${key.publishable_token ?? key.token_hint}</code> (${key.kind},
              ${key.mode}) is refused from the moment you confirm, on every replica. This cannot be undone: a revoked
              key is replaced by a new one.`,
              confirm: 'Revoke the key',
              keep: { href: appLink(app, '/keys', key.mode), label: 'Keep it' },
            }),
            { app, mode: key.mode },
          );
        await accounts.revokeKey(key.id);
        return { redirect: appLink(app, '/keys', key.mode, `&revoked=${key.id}`) };
      },
    },
  );
}
