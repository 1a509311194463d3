import { PASSWORD_MIN } from '../../modules/dashboard/schema.js';
import type { DashboardService } from '../../modules/dashboard/service.js';
import { html } from '../html.js';
import { csrfField } from '../layout.js';
import { field, pages } from '../pages.js';

/** Where to go after signing in: a dashboard path only, so the link cannot send anyone elsewhere. */
const nextPath = (next: string | undefined) =>
  next && /^\/dashboard(\/[\w\-/?=&%.]*)?$/.test(next) && !next.startsWith('//') ? next : '/dashboard/apps';

/** Signing in and out, and accepting an invitation: the only pages without a session. */
export function authPages(dashboard: DashboardService) {
  const loginForm = (csrf: string, next: string, email = '') => html`
    <form method="post" action="/dashboard/login" class="narrow">
      ${csrfField(csrf)}<input type="hidden" name="next" value="${next}">
      <div class="field"><label for="email">Email</label>
        <input id="email" name="email" type="email" autocomplete="username" required value="${email}"></div>
      <div class="field"><label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required></div>
      <div class="actions"><button type="submit">Sign in</button></div>
    </form>
    <p class="muted">No account? An owner of your account invites you; the operator invites an account's first
    owner with <code>npm run admin -- dashboard invite</code>.</p>`;

  return pages(
    {
      method: 'GET',
      url: '/dashboard/login',
      access: 'anonymous',
      handle: async (ctx) => {
        if (ctx.member) return { redirect: nextPath(ctx.query.next) };
        return ctx.page('Sign in', loginForm(ctx.csrf, nextPath(ctx.query.next)));
      },
    },
    {
      method: 'POST',
      url: '/dashboard/login',
      access: 'anonymous',
      handle: async (ctx) => {
        const { sessionToken } = await dashboard.signIn(
          { email: field(ctx.form, 'email'), password: field(ctx.form, 'password') },
          ctx.client,
        );
        await ctx.signIn(sessionToken);
        return { redirect: nextPath(field(ctx.form, 'next')) };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/logout',
      access: 'read',
      handle: async (ctx) => {
        await dashboard.revokeSession(ctx.member, ctx.session.id);
        ctx.signOut();
        return { redirect: '/dashboard/login' };
      },
    },
    {
      method: 'GET',
      url: '/dashboard/invitations/:token',
      access: 'anonymous',
      handle: async (ctx) => {
        const invite = await dashboard.openInvite(ctx.params.token!);
        if (!invite)
          return {
            status: 404,
            body: ctx.page(
              'Invitation not found',
              html`<p class="alert" role="alert">This invitation link has expired, was used or was withdrawn; ask an
              owner of the account for a new one.</p>`,
            ),
          };
        return ctx.page(
          'Join the dashboard',
          html`<p>You are invited as <strong>${invite.role}</strong> with <strong>${invite.email}</strong>. Choose your
          name and a password to finish.</p>
          <form method="post" action="${ctx.path}" class="narrow">
            ${csrfField(ctx.csrf)}
            <div class="field"><label for="name">Your name</label>
              <input id="name" name="name" autocomplete="name" required maxlength="100"></div>
            <div class="field"><label for="password">Password</label>
              <input id="password" name="password" type="password" autocomplete="new-password" required
                minlength="${PASSWORD_MIN}" aria-describedby="password-hint">
              <p class="hint" id="password-hint">At least ${PASSWORD_MIN} characters; a passphrase is best.</p></div>
            <div class="actions"><button type="submit">Join</button></div>
          </form>`,
        );
      },
    },
    {
      method: 'POST',
      url: '/dashboard/invitations/:token',
      access: 'anonymous',
      handle: async (ctx) => {
        const { sessionToken } = await dashboard.acceptInvite(
          ctx.params.token!,
          { name: field(ctx.form, 'name'), password: field(ctx.form, 'password') },
          ctx.client,
        );
        await ctx.signIn(sessionToken);
        return { redirect: '/dashboard/apps' };
      },
    },
  );
}
