import { route } from '../../platform/route.js';
import { ReportQuery, ReportResponse, TicketRequest, TicketResponse } from './schema.js';
import type { ShieldService } from './service.js';

export const shieldRoutes = (shield: ShieldService) => [
  // Called from clients with the publishable key; any web origin may call it (CORS).
  route({
    operationId: 'shield.ticket.create',
    method: 'POST',
    url: '/v1/realtime/shield/ticket',
    auth: 'publishable-key',
    tags: ['shield'],
    summary: 'A signed verdict about this client, for your server to verify with shield_secret',
    body: TicketRequest,
    response: TicketResponse,
    admission: 'in-handler',
    handler: ({ caller, body, client, admit }) => shield.issueTicket(caller, body, client, admit),
  }),
  route({
    operationId: 'shield.report.get',
    method: 'GET',
    url: '/v1/realtime/shield/report',
    auth: 'secret-key',
    tags: ['shield'],
    summary: 'Verdict counts and the busiest (hashed) addresses over the last 1-30 UTC days',
    query: ReportQuery,
    response: ReportResponse,
    handler: ({ caller, query }) => shield.report(caller, query.days),
  }),
];
