import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { toServiceError } from '../http/error-handler.js';
import { SESSION_TTL_MS } from '../modules/dashboard/schema.js';
import type { DashboardService } from '../modules/dashboard/service.js';
import { ServiceError } from '../platform/errors.js';
import { Html, html } from './html.js';
import { assets, layout } from './layout.js';
import type { Form, PageDeclaration, PageResult } from './pages.js';
import {
  CSRF_FIELD,
  cookie,
  createCsrf,
  newPreSessionValue,
  PRE_SESSION_COOKIE,
  readCookies,
  SESSION_COOKIE,
} from './security.js';

/** Built by `npm run build -w control-plane` (esbuild); the same path from src/ and dist/. */
const ASSET_DIR = new URL('../../dist/dashboard-assets/', import.meta.url);
const ASSET_TYPES = {
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
} as const;
const FORM_BODY_LIMIT = 64 * 1024;

/**
 * Pages run their own scripts and styles only, are never framed, and never leak their URLs
 * (invitation links carry a token) to another site.
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
};

function loadAssets(): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const name of Object.keys(ASSET_TYPES)) {
    const url = new URL(name, ASSET_DIR);
    if (!existsSync(url)) continue;
    const content = readFileSync(url);
    files.set(name, content);
    assets[name === 'app.js' ? 'js' : 'css'] = createHash('sha256')
      .update(content)
      .digest('hex')
      .slice(0, 12);
  }
  return files;
}

export interface DashboardOptions {
  dashboard: DashboardService;
  pages: PageDeclaration[];
  /** Derives the CSRF key. */
  secret: string;
  /** Cookies are Secure when the dashboard's public URL is HTTPS. */
  publicUrl: string;
}

/** The developer dashboard: server-rendered pages under /dashboard, on the public listener. */
export async function registerDashboard(app: FastifyInstance, options: DashboardOptions) {
  const csrf = createCsrf(options.secret);
  const secure = options.publicUrl.startsWith('https:');
  const publicOrigin = new URL(options.publicUrl).origin;
  const files = loadAssets();

  await app.register(async (scope) => {
    // Pages for people, not API operations: the OpenAPI document never lists them.
    scope.addHook('onRoute', (route) => {
      route.schema = { ...route.schema, hide: true };
    });
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: FORM_BODY_LIMIT },
      (_request, body, done) => {
        // No prototype: a field named __proto__ is just a field.
        const form: Form = Object.create(null);
        for (const [name, value] of new URLSearchParams(body as string)) {
          const earlier = form[name];
          form[name] =
            earlier === undefined ? value : [...(Array.isArray(earlier) ? earlier : [earlier]), value];
        }
        done(null, form);
      },
    );
    scope.addHook('onSend', async (_request, reply) => {
      reply.headers(SECURITY_HEADERS);
      // Pages are never cached; the assets say otherwise for themselves.
      if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
    });

    scope.get('/dashboard/assets/:name', async (request, reply) => {
      const { name } = request.params as { name: string };
      const content = files.get(name);
      if (!content) return reply.code(404).type('text/plain').send('not found');
      // The pages name each asset with its content hash: a new build is a new URL.
      return reply
        .type(ASSET_TYPES[name as keyof typeof ASSET_TYPES])
        .header('cache-control', 'public, max-age=31536000, immutable')
        .send(content);
    });
    scope.get('/dashboard', async (_request, reply) => reply.redirect('/dashboard/apps', 303));

    // Any other dashboard path: a page that says so (the declared pages are more specific, and win).
    scope.get('/dashboard/*', async (request, reply) =>
      sendPage(reply, 404, errorPage(request, 'Not found', 'There is no such page in the dashboard.')),
    );
    scope.setErrorHandler((error, request, reply) => {
      const rendered = toServiceError(error as Error, request.id);
      if (rendered.status >= 500) request.log.error({ err: error }, 'dashboard request failed');
      reply.headers(rendered.headers);
      return sendPage(
        reply,
        rendered.status,
        errorPage(request, rendered.status === 429 ? 'Slow down' : 'That did not work', rendered.message),
      );
    });

    for (const declared of options.pages) {
      scope.route({
        method: declared.method,
        url: declared.url,
        handler: async (request, reply) => {
          const cookies = readCookies(request.headers.cookie);
          const sessionToken = cookies.get(SESSION_COOKIE);
          const found = sessionToken ? await options.dashboard.sessionOf(sessionToken) : null;
          let preValue = cookies.get(PRE_SESSION_COOKIE);
          if (declared.access === 'anonymous' && !preValue) {
            preValue = newPreSessionValue();
            reply.header('set-cookie', cookie(PRE_SESSION_COOKIE, preValue, { secure }));
          }
          const base = {
            params: request.params as Record<string, string>,
            query: firstValues(request.query as Record<string, string | string[]>),
            form: (request.body ?? {}) as Form,
            client: { address: request.ip, userAgent: String(request.headers['user-agent'] ?? '') },
            path: request.url.split('?')[0]!,
          };
          let result: PageResult;
          if (declared.access === 'anonymous') {
            if (declared.method === 'POST') checkForgery(request, 'pre', preValue);
            const token = csrf.tokenOf('pre', preValue!);
            result = await declared.handle({
              ...base,
              csrf: token,
              member: found?.member ?? null,
              page: (title, body) => layout({ title, csrf: token, path: base.path }, body),
              signIn: async (newToken) => {
                // The browser's earlier session, if any, ends: one browser, one session.
                if (found) await options.dashboard.revokeSession(found.member, found.session.id);
                reply.header(
                  'set-cookie',
                  cookie(SESSION_COOKIE, newToken, { secure, maxAgeSeconds: SESSION_TTL_MS / 1000 }),
                );
              },
            });
          } else {
            if (!found) {
              if (declared.method === 'GET')
                return reply.redirect(`/dashboard/login?next=${encodeURIComponent(request.url)}`, 303);
              throw new ServiceError('authentication_error', 'Your session has ended; sign in again');
            }
            if (declared.method === 'POST') checkForgery(request, 'session', sessionToken);
            options.dashboard.require(found.member, declared.access);
            const token = csrf.tokenOf('session', sessionToken!);
            result = await declared.handle({
              ...base,
              csrf: token,
              member: found.member,
              session: found.session,
              can: (right) => options.dashboard.can(found.member, right),
              signOut: () =>
                reply.header('set-cookie', cookie(SESSION_COOKIE, '', { secure, maxAgeSeconds: 0 })),
              page: (title, body, extra = {}) =>
                layout({ title, csrf: token, path: base.path, member: found.member, ...extra }, body),
            });
          }
          if (result instanceof Html) return sendPage(reply, 200, result);
          if ('redirect' in result) return reply.redirect(result.redirect, 303);
          return sendPage(reply, result.status, result.body);
        },
      });
    }

    /** The error page: the message in words, with a way back. */
    function errorPage(request: FastifyRequest, title: string, message: string): Html {
      const back = sameOriginReferrer(request);
      return layout(
        { title, csrf: '', path: request.url.split('?')[0]! },
        html`<p class="alert" role="alert">${message}</p>
          <p><a href="${back ?? '/dashboard/apps'}">${back ? 'Go back' : 'Go to the dashboard'}</a></p>`,
      );
    }
  });

  /**
   * A POST must carry the CSRF token of the browser's session (or, on the sign-in and invitation
   * forms, of its pre-session cookie), and must not come from another origin.
   */
  function checkForgery(request: FastifyRequest, kind: 'session' | 'pre', value: string | undefined) {
    const origin = request.headers.origin;
    const fromHere =
      origin === undefined || origin === publicOrigin || origin === `${request.protocol}://${request.host}`;
    const presented = ((request.body ?? {}) as Form)[CSRF_FIELD];
    if (!fromHere || value === undefined || !csrf.verify(kind, value, presented))
      throw new ServiceError(
        'permission_error',
        'This form was not sent from this dashboard page (its security token is missing or stale); reload the page and try again',
        { code: 'CSRF' },
      );
  }
}

function sameOriginReferrer(request: FastifyRequest): string | undefined {
  const referrer = request.headers.referer;
  if (!referrer) return undefined;
  try {
    const url = new URL(referrer);
    return url.host === request.host && url.pathname.startsWith('/dashboard')
      ? url.pathname + url.search
      : undefined;
  } catch {
    return undefined;
  }
}

/** A query parameter given twice counts once, as its first value. */
function firstValues(query: Record<string, string | string[]>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(query).map(([name, value]) => [name, Array.isArray(value) ? (value[0] ?? '') : value]),
  );
}

function sendPage(reply: FastifyReply, status: number, page: Html) {
  return reply.code(status).type('text/html; charset=utf-8').send(page.text);
}
