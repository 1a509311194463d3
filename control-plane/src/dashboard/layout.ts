import type { AppRow } from '../modules/accounts/schema.js';
import type { Member } from '../modules/dashboard/service.js';
import type { KeyMode } from '../platform/caller.js';
import { type Html, html, raw } from './html.js';
import { CSRF_FIELD } from './security.js';

/** The built stylesheet and script, with their content hashes (set once the plugin reads them). */
export const assets = { css: '', js: '' };

export interface Shell {
  title: string;
  member?: Member;
  csrf: string;
  path: string;
  app?: AppRow;
  mode?: KeyMode;
}

const ACCOUNT_NAV = [
  ['/dashboard/apps', 'Apps'],
  ['/dashboard/usage', 'Usage'],
  ['/dashboard/billing', 'Balance'],
  ['/dashboard/team', 'Team'],
] as const;

const APP_NAV = [
  ['', 'Overview'],
  ['/keys', 'Keys'],
  ['/webhooks', 'Webhooks'],
  ['/settings', 'Settings'],
  ['/shield', 'Shield'],
  ['/storage', 'Storage'],
] as const;

/** A link that carries the app page's mode along. */
export const appLink = (app: AppRow, section: string, mode: KeyMode, query = '') =>
  `/dashboard/apps/${app.id}${section}?mode=${mode}${query}`;

/** aria-current on the link of the page being shown, and nothing on the others. */
const current = (on: boolean, value = 'page') => (on ? raw(` aria-current="${value}"`) : '');

export const csrfField = (csrf: string) => html`<input type="hidden" name="${CSRF_FIELD}" value="${csrf}">`;

/** A button that posts: every state change is a POST carrying the CSRF token. */
export const postButton = (
  action: string,
  csrf: string,
  label: string,
  options: { style?: 'danger' | 'plain'; fields?: Record<string, string> } = {},
) =>
  html`<form method="post" action="${action}" class="inline">${csrfField(csrf)}${Object.entries(
    options.fields ?? {},
  ).map(
    ([name, value]) => html`<input type="hidden" name="${name}" value="${value}">`,
  )}<button type="submit" class="${options.style ?? ''}">${label}</button></form>`;

export const emptyState = (message: string, next?: Html) =>
  html`<div class="empty"><p>${message}</p>${next ?? ''}</div>`;

function appNav(shell: Shell & { app: AppRow }) {
  const mode = shell.mode ?? 'test';
  const base = `/dashboard/apps/${shell.app.id}`;
  return html`<nav class="subnav" aria-label="App ${shell.app.name}">
    <a class="app-name" href="/dashboard/apps">${shell.app.name}</a>
    <ul>${APP_NAV.map(
      ([section, label]) =>
        html`<li><a href="${appLink(shell.app, section, mode)}" ${current(shell.path === base + section)}>${label}</a></li>`,
    )}</ul>
    ${
      shell.mode
        ? html`<p class="modes" aria-label="Key mode">Mode:
      ${(['test', 'live'] as const).map(
        (m) =>
          html` <a href="${shell.path}?mode=${m}" class="mode ${m}"${current(m === shell.mode, 'true')}>${m}</a>`,
      )}</p>`
        : ''
    }
  </nav>`;
}

export function layout(shell: Shell, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${shell.title} · svc dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/dashboard/assets/app.css?v=${assets.css}">
<script type="module" src="/dashboard/assets/app.js?v=${assets.js}"></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <a class="brand" href="/dashboard/apps">svc dashboard</a>
  ${
    shell.member
      ? html`<nav aria-label="Account"><ul>${ACCOUNT_NAV.map(
          ([href, label]) => html`<li><a href="${href}" ${current(shell.path === href)}>${label}</a></li>`,
        )}</ul></nav>
  <div class="who"><span>${shell.member.name} · ${shell.member.role}</span>
    ${postButton('/dashboard/logout', shell.csrf, 'Sign out', { style: 'plain' })}</div>`
      : ''
  }
</header>
${shell.app ? appNav({ ...shell, app: shell.app }) : ''}
<main id="main" tabindex="-1">
<h1>${shell.title}</h1>
${body}
</main>
</body>
</html>`;
}

/** A secret (or one-time link) shown once: the warning, the value with a copy button, the way on. */
export const shownOnce = (options: {
  warning: string;
  id: string;
  value: string;
  next: { href: string; label: string };
}) =>
  html`<p class="warning" role="alert">${options.warning}</p>
  <p class="secret"><code id="${options.id}">${options.value}</code></p>
  <div class="actions"><button type="button" data-copy="${options.id}">Copy</button>
    <a href="${options.next.href}">${options.next.label}</a></div>`;

/** The question before a destructive action: the same form posted again with confirm=yes, or a way back. */
export const confirmation = (options: {
  action: string;
  csrf: string;
  warning: Html;
  confirm: string;
  keep: { href: string; label: string };
}) =>
  html`<p class="warning">${options.warning}</p>
  <div class="actions">${postButton(options.action, options.csrf, options.confirm, { style: 'danger', fields: { confirm: 'yes' } })}
    <a href="${options.keep.href}">${options.keep.label}</a></div>`;

/** The link to a list's next page: the same page and filters, with the cursor the list gave. */
export function pager(
  path: string,
  query: Record<string, string>,
  nextCursor: string | null,
  label = 'Next page',
) {
  if (nextCursor === null) return '';
  const search = new URLSearchParams({ ...query, cursor: nextCursor });
  return html`<p class="pager"><a href="${path}?${search.toString()}">${label}</a></p>`;
}
