import type { AccountsService } from '../../modules/accounts/service.js';
import type { Member } from '../../modules/dashboard/service.js';
import { errors } from '../../platform/errors.js';
import { modeOf } from '../pages.js';

/** An app of the member's own account; another account's is a 404, as if it did not exist. */
export async function appOf(accounts: AccountsService, member: Member, appId: string) {
  const app = await accounts.getApp(appId);
  if (!app || app.account_id !== member.account_id) throw errors.notFound(`App ${appId}`);
  return app;
}

/** An app page's app, its key mode (?mode=) and the scope the services take. */
export async function appScopeOf(
  accounts: AccountsService,
  ctx: { member: Member; params: Record<string, string>; query: Record<string, string> },
) {
  const app = await appOf(accounts, ctx.member, ctx.params.app!);
  const mode = modeOf(ctx.query);
  return { app, mode, scope: { appId: app.id, mode } };
}
