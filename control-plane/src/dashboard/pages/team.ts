import { PASSWORD_MIN, ROLES } from '../../modules/dashboard/schema.js';
import type { DashboardService } from '../../modules/dashboard/service.js';
import { when } from '../format.js';
import { html } from '../html.js';
import { csrfField, postButton, shownOnce } from '../layout.js';
import { field, oneOf, pages } from '../pages.js';

const RIGHTS_TEXT = {
  owner: 'everything, including the team and billing settings',
  developer: 'apps, keys, webhooks, settings, storage and secrets',
  viewer: 'reads everything but secrets; changes nothing',
} as const;

const NOTICES = {
  session: 'The session is signed out.',
  others: 'Every other session of yours is signed out.',
  password: 'Your password is changed; your other sessions are signed out.',
};

/** The account's people, invitations and the member's own sessions. */
export function teamPages(deps: { dashboard: DashboardService; publicUrl: string }) {
  const { dashboard } = deps;
  return pages(
    {
      method: 'GET',
      url: '/dashboard/team',
      access: 'read',
      handle: async (ctx) => {
        const [team, sessions] = await Promise.all([
          dashboard.team(ctx.member),
          dashboard.sessions(ctx.member),
        ]);
        const canManage = ctx.can('manage_team');
        return ctx.page(
          'Team',
          html`${Object.hasOwn(NOTICES, ctx.query.done ?? '') ? html`<p class="notice" role="status">${NOTICES[ctx.query.done as keyof typeof NOTICES]}</p>` : ''}
          <ul class="muted">${ROLES.map((role) => html`<li><strong>${role}</strong>: ${RIGHTS_TEXT[role]}</li>`)}</ul>
          <h2>People</h2>
          <div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">People of the account</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Since</th>
              ${canManage ? html`<th scope="col"><span class="visually-hidden">Actions</span></th>` : ''}</tr></thead>
            <tbody>${team.users.map(
              (
                user,
              ) => html`<tr><td>${user.name}${user.id === ctx.member.id ? ' (you)' : ''}</td><td>${user.email}</td>
                <td>${
                  canManage
                    ? html`<form method="post" action="/dashboard/team/people/${user.id}/role" class="inline">${csrfField(ctx.csrf)}
                    <label class="visually-hidden" for="role-${user.id}">Role of ${user.name}</label>
                    <select id="role-${user.id}" name="role">${ROLES.map((role) => html`<option value="${role}"${role === user.role ? html` selected` : ''}>${role}</option>`)}</select>
                    <button type="submit">Change</button></form>`
                    : user.role
                }</td><td>${when(user.created_at)}</td>
                ${canManage ? html`<td>${user.id === ctx.member.id ? '' : postButton(`/dashboard/team/people/${user.id}/remove`, ctx.csrf, 'Remove', { style: 'danger' })}</td>` : ''}</tr>`,
            )}</tbody></table></div>
          ${
            canManage
              ? html`<h2>Invitations</h2>
            ${
              team.invites.length === 0
                ? html`<p class="muted">No invitations waiting.</p>`
                : html`<div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">Invitations waiting</caption>
              <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Expires</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
              <tbody>${team.invites.map(
                (
                  invite,
                ) => html`<tr><td>${invite.email}</td><td>${invite.role}</td><td>${when(invite.expires_at)}</td>
                  <td>${postButton(`/dashboard/team/invitations/${invite.id}/revoke`, ctx.csrf, 'Withdraw')}</td></tr>`,
              )}</tbody></table></div>`
            }
            <form method="post" action="/dashboard/team/invitations" class="inline-fields">${csrfField(ctx.csrf)}
              <div class="field"><label for="invite-email">Email</label><input id="invite-email" name="email" type="email" required></div>
              <div class="field"><label for="invite-role">Role</label><select id="invite-role" name="role">${ROLES.map(
                (role) =>
                  html`<option value="${role}"${role === 'developer' ? html` selected` : ''}>${role}</option>`,
              )}</select></div>
              <div class="actions"><button type="submit">Invite</button></div></form>`
              : ''
          }
          <h2>Your sessions</h2>
          <div class="table-wrap" tabindex="0"><table><caption class="visually-hidden">Your sessions</caption>
            <thead><tr><th scope="col">Browser</th><th scope="col">Address</th><th scope="col">Signed in</th><th scope="col">Last seen</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>${sessions.map(
              (
                session,
              ) => html`<tr><td>${session.user_agent || 'unknown'}${session.id === ctx.session.id ? ' (this one)' : ''}</td>
                <td>${session.address}</td><td>${when(session.created_at)}</td><td>${when(session.last_seen_at)}</td>
                <td>${postButton(`/dashboard/sessions/${session.id}/revoke`, ctx.csrf, 'Sign out')}</td></tr>`,
            )}</tbody></table></div>
          ${sessions.length > 1 ? html`<div class="actions">${postButton('/dashboard/sessions/others/revoke', ctx.csrf, 'Sign out everywhere else')}</div>` : ''}
          <h2>Your password</h2>
          <form method="post" action="/dashboard/password" class="narrow">${csrfField(ctx.csrf)}
            <div class="field"><label for="current-password">Current password</label>
              <input id="current-password" name="current_password" type="password" autocomplete="current-password" required></div>
            <div class="field"><label for="new-password">New password</label>
              <input id="new-password" name="new_password" type="password" autocomplete="new-password" required
                minlength="${PASSWORD_MIN}" aria-describedby="new-password-hint">
              <p class="hint" id="new-password-hint">At least ${PASSWORD_MIN} characters. Your other sessions are signed out.</p></div>
            <div class="actions"><button type="submit">Change password</button></div>
          </form>`,
        );
      },
    },
    {
      method: 'POST',
      url: '/dashboard/team/invitations',
      access: 'manage_team',
      handle: async (ctx) => {
        const { invite, token } = await dashboard.invite(ctx.member, {
          email: field(ctx.form, 'email'),
          role: oneOf(ctx.form, 'role', ROLES),
        });
        return {
          status: 201,
          body: ctx.page(
            'Invitation ready',
            shownOnce({
              warning: `Send this link to ${invite.email} yourself: it is shown only this once, works once, and expires ${when(invite.expires_at)}.`,
              id: 'invite-link',
              value: `${deps.publicUrl}/dashboard/invitations/${token}`,
              next: { href: '/dashboard/team', label: 'Back to the team' },
            }),
          ),
        };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/team/invitations/:invite/revoke',
      access: 'manage_team',
      handle: async (ctx) => {
        await dashboard.revokeInvite(ctx.member, ctx.params.invite!);
        return { redirect: '/dashboard/team' };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/team/people/:user/role',
      access: 'manage_team',
      handle: async (ctx) => {
        await dashboard.setRole(ctx.member, ctx.params.user!, oneOf(ctx.form, 'role', ROLES));
        return { redirect: '/dashboard/team' };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/team/people/:user/remove',
      access: 'manage_team',
      handle: async (ctx) => {
        await dashboard.removeUser(ctx.member, ctx.params.user!);
        return { redirect: '/dashboard/team' };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/sessions/:session/revoke',
      access: 'read',
      handle: async (ctx) => {
        await dashboard.revokeSession(ctx.member, ctx.params.session!);
        if (ctx.params.session !== ctx.session.id) return { redirect: '/dashboard/team?done=session' };
        ctx.signOut();
        return { redirect: '/dashboard/login' };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/sessions/others/revoke',
      access: 'read',
      handle: async (ctx) => {
        await dashboard.revokeOtherSessions(ctx.member, ctx.session.id);
        return { redirect: '/dashboard/team?done=others' };
      },
    },
    {
      method: 'POST',
      url: '/dashboard/password',
      access: 'read',
      handle: async (ctx) => {
        await dashboard.changePassword(
          ctx.member,
          ctx.session.id,
          { current: field(ctx.form, 'current_password'), next: field(ctx.form, 'new_password') },
          ctx.client,
        );
        return { redirect: '/dashboard/team?done=password' };
      },
    },
  );
}
