import type { FastifyInstance } from 'fastify';
import type { Container } from '../container.js';
import { appPages } from './pages/apps.js';
import { authPages } from './pages/auth.js';
import { moneyPages } from './pages/money.js';
import { productPages } from './pages/products.js';
import { teamPages } from './pages/team.js';
import { webhookPages } from './pages/webhooks.js';
import { registerDashboard } from './plugin.js';

/** Every page of the dashboard, on the same services the API uses. */
export function dashboardOn(app: FastifyInstance, container: Container) {
  const publicUrl = container.settings.SVC_PUBLIC_URL;
  return registerDashboard(app, {
    dashboard: container.dashboard,
    secret: container.settings.SVC_SEALING_KEY,
    publicUrl,
    pages: [
      ...authPages(container.dashboard),
      ...appPages({ accounts: container.accounts, orgs: container.orgs, publicUrl }),
      ...webhookPages({ accounts: container.accounts, webhooks: container.webhooks }),
      ...productPages({
        accounts: container.accounts,
        realtime: container.realtime,
        shield: container.shield,
        storage: container.storage,
      }),
      ...moneyPages({
        billing: container.billing,
        defaultThresholdUsd: container.settings.SVC_BALANCE_LOW_USD,
      }),
      ...teamPages({ dashboard: container.dashboard, publicUrl }),
    ],
  });
}
