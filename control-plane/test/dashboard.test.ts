import { type Interceptor, sql } from 'slonik';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../src/app.js';
import type { Role } from '../src/modules/dashboard/schema.js';
import {
  LOGIN_FAILURES_PER_ADDRESS,
  LOGIN_FAILURES_PER_EMAIL,
  LOGIN_WINDOW_SECONDS,
  SESSION_IDLE_MS,
} from '../src/modules/dashboard/schema.js';
import { clientNetwork } from '../src/platform/addresses.js';
import { parseUsd } from '../src/platform/money.js';
import { appWithUsers } from './app-users.js';
import { callWithKey, createCustomer, startTestApp, type TestContext, uniqueAddress } from './support.js';

const PASSWORD = 'correct horse battery staple';

/**
 * A browser as the dashboard sees one, through inject: it keeps its cookies, reads each page's CSRF
 * token and posts forms from its own address.
 */
class Browser {
  private readonly cookies = new Map<string, string>();
  csrf = '';
  constructor(
    private readonly app: App,
    readonly address = uniqueAddress(),
  ) {}

  private remember(setCookie: string | string[] | undefined) {
    for (const line of [setCookie ?? []].flat()) {
      const [pair = ''] = line.split(';');
      const at = pair.indexOf('=');
      this.cookies.set(pair.slice(0, at), pair.slice(at + 1));
    }
  }

  private get cookieHeader() {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  async get(url: string, headers: Record<string, string> = {}) {
    const response = await this.app.inject({
      method: 'GET',
      url,
      headers: { cookie: this.cookieHeader, ...headers },
      remoteAddress: this.address,
    });
    this.remember(response.headers['set-cookie']);
    const token = /name="_csrf" value="([^"]+)"/.exec(response.body)?.[1];
    if (token) this.csrf = token;
    return response;
  }

  async post(
    url: string,
    fields: Record<string, string | string[]>,
    options: { csrf?: string | null; origin?: string } = {},
  ) {
    const form = new URLSearchParams();
    for (const [name, value] of Object.entries(fields))
      for (const one of [value].flat()) form.append(name, one);
    if (options.csrf !== null) form.set('_csrf', options.csrf ?? this.csrf);
    const response = await this.app.inject({
      method: 'POST',
      url,
      headers: {
        cookie: this.cookieHeader,
        'content-type': 'application/x-www-form-urlencoded',
        ...(options.origin ? { origin: options.origin } : {}),
      },
      payload: form.toString(),
      remoteAddress: this.address,
    });
    this.remember(response.headers['set-cookie']);
    return response;
  }

  session() {
    return this.cookies.get('svc_dash_session');
  }
}

/** A network whose sign-in window ends while its password is checked (its counter expires then). */
let windowEndsFor: string | null = null;
const windowEnds: Interceptor = {
  name: 'sign-in-window-ends',
  beforeQueryExecution: async (_context, query) => {
    if (windowEndsFor && query.sql.includes('password_hash from dashboard_users')) {
      const keys = await ctx.container.redis.keys(`svc:dash:login:addr:${clientNetwork(windowEndsFor)}:*`);
      if (keys.length > 0) await ctx.container.redis.del(...keys);
    }
    return null;
  },
};

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp({ interceptors: [windowEnds] });
});
afterAll(() => ctx?.close());

let emails = 0;
const newEmail = () => {
  emails += 1;
  return `person${Date.now()}.${emails}@example.com`;
};

/** An owner of the account the operator invites, signed in: their browser and email. */
async function anotherOwner(customer: Awaited<ReturnType<typeof createCustomer>>, name = 'Olga Owner') {
  const email = newEmail();
  const { token } = await ctx.container.dashboard.inviteOwner(customer.account.id, email);
  const browser = new Browser(ctx.app);
  await browser.get(`/dashboard/invitations/${token}`);
  const joined = await browser.post(`/dashboard/invitations/${token}`, { name, password: PASSWORD });
  expect(joined.statusCode).toBe(303);
  return { browser, email };
}

/** An account with an app and a key, and a signed-in person of the given role in it. */
async function member(role: Role = 'owner', customer?: Awaited<ReturnType<typeof createCustomer>>) {
  const account = customer ?? (await createCustomer(ctx.container));
  const { browser: owner } = await anotherOwner(account);
  if (role === 'owner') return { browser: owner, customer: account };
  await owner.get('/dashboard/team');
  const email = newEmail();
  const invited = await owner.post('/dashboard/team/invitations', { email, role });
  expect(invited.statusCode).toBe(201);
  const link = /\/dashboard\/invitations\/(dinv_\w+)/.exec(invited.body)![1]!;
  const browser = new Browser(ctx.app);
  await browser.get(`/dashboard/invitations/${link}`);
  expect(
    (await browser.post(`/dashboard/invitations/${link}`, { name: 'Dev', password: PASSWORD })).statusCode,
  ).toBe(303);
  await browser.get('/dashboard/apps');
  return { browser, customer: account, email, owner };
}

describe('dashboard sign-in', () => {
  it('takes an invitation once, then signs in by password', async () => {
    const customer = await createCustomer(ctx.container);
    const email = newEmail();
    const { token } = await ctx.container.dashboard.inviteOwner(customer.account.id, email.toUpperCase());
    const browser = new Browser(ctx.app);
    expect((await browser.get(`/dashboard/invitations/${token}`)).body).toContain(email);
    const short = await browser.post(`/dashboard/invitations/${token}`, {
      name: 'Olga',
      password: 'eleven char',
    });
    expect(short.statusCode).toBe(422);
    expect(short.body).toContain('password must be 12-256 characters');
    const joined = await browser.post(`/dashboard/invitations/${token}`, {
      name: 'Olga',
      password: PASSWORD,
    });
    expect(joined.statusCode).toBe(303);
    expect(joined.headers['set-cookie']).toMatch(
      /svc_dash_session=dsess_\w+; Path=\/dashboard; HttpOnly; SameSite=Strict/,
    );
    const apps = await browser.get('/dashboard/apps');
    expect(apps.statusCode).toBe(200);
    expect(apps.body).toContain(customer.app.id);
    expect(apps.headers['content-security-policy']).toContain("script-src 'self'");
    expect(apps.headers['cache-control']).toBe('no-store');
    // The page names its assets by content hash, so they are cached for good (built by npm run build).
    const script = /src="(\/dashboard\/assets\/app\.js\?v=[0-9a-f]{12})"/.exec(apps.body)![1]!;
    const asset = await browser.get(script);
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');

    const again = new Browser(ctx.app);
    expect((await again.get(`/dashboard/invitations/${token}`)).statusCode).toBe(404);
    await again.get('/dashboard/login');
    expect(
      (await again.post(`/dashboard/invitations/${token}`, { name: 'Eve', password: PASSWORD })).statusCode,
    ).toBe(404);

    const other = new Browser(ctx.app);
    await other.get('/dashboard/login');
    const wrong = await other.post('/dashboard/login', { email, password: `${PASSWORD}!` });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.body).toContain('Wrong email or password');
    const right = await other.post('/dashboard/login', {
      email: ` ${email.toUpperCase()} `,
      password: PASSWORD,
    });
    expect(right.statusCode).toBe(303);
    expect((await other.get('/dashboard/apps')).statusCode).toBe(200);
  });

  it('leaves no counter behind when the window ends during a successful sign-in', async () => {
    const { customer } = await member();
    const { email } = await anotherOwner(customer, 'Late owner');
    const late = new Browser(ctx.app);
    await late.get('/dashboard/login');
    windowEndsFor = late.address;
    try {
      expect((await late.post('/dashboard/login', { email, password: PASSWORD })).statusCode).toBe(303);
    } finally {
      windowEndsFor = null;
    }
    // Taken back from a counter that was gone, a DECR would leave -1 with no expiry, forever.
    expect(await ctx.container.redis.keys(`svc:dash:login:addr:${clientNetwork(late.address)}:*`)).toEqual(
      [],
    );
  });

  it(`refuses every sign-in after ${LOGIN_FAILURES_PER_EMAIL} failures for an email, until the window ends`, async () => {
    const { customer } = await member();
    const { email } = await anotherOwner(customer, 'Second owner');

    for (let i = 0; i < LOGIN_FAILURES_PER_EMAIL; i += 1) {
      // Each attempt from another address: the email's own limit is what stops them.
      const attacker = new Browser(ctx.app);
      await attacker.get('/dashboard/login');
      expect(
        (await attacker.post('/dashboard/login', { email, password: `guess ${i} guess ${i}` })).statusCode,
      ).toBe(401);
    }
    const owned = new Browser(ctx.app);
    await owned.get('/dashboard/login');
    const refused = await owned.post('/dashboard/login', { email, password: PASSWORD });
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toMatch(/^\d+$/);
    expect(refused.body).toContain('Too many failed sign-ins');

    ctx.clock.advance(LOGIN_WINDOW_SECONDS * 1000);
    expect((await owned.post('/dashboard/login', { email, password: PASSWORD })).statusCode).toBe(303);
  });

  it(`refuses an address after ${LOGIN_FAILURES_PER_ADDRESS} failures, whatever the emails`, async () => {
    const attacker = new Browser(ctx.app);
    await attacker.get('/dashboard/login');
    for (let i = 0; i < LOGIN_FAILURES_PER_ADDRESS; i += 1)
      expect(
        (await attacker.post('/dashboard/login', { email: newEmail(), password: PASSWORD })).statusCode,
      ).toBe(401);
    expect(
      (await attacker.post('/dashboard/login', { email: newEmail(), password: PASSWORD })).statusCode,
    ).toBe(429);
  });

  it('counts a burst of concurrent guesses as it arrives', async () => {
    const { customer } = await member();
    const { email } = await anotherOwner(customer, 'Target');
    const attackers = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const attacker = new Browser(ctx.app);
        await attacker.get('/dashboard/login');
        return attacker;
      }),
    );
    const answers = await Promise.all(
      attackers.map((attacker, i) =>
        attacker.post('/dashboard/login', { email, password: `guess number ${i}` }),
      ),
    );
    const statuses = answers.map((answer) => answer.statusCode);
    expect(statuses.filter((status) => status === 401)).toHaveLength(LOGIN_FAILURES_PER_EMAIL);
    expect(statuses.filter((status) => status === 429)).toHaveLength(20 - LOGIN_FAILURES_PER_EMAIL);
  });

  it('counts an IPv6 /64 as one address', async () => {
    const network = `2001:db8:${Math.floor(Math.random() * 0xffff).toString(16)}:${Math.floor(Math.random() * 0xffff).toString(16)}`;
    const attempt = async (i: number) => {
      const attacker = new Browser(ctx.app, `${network}::${(i + 1).toString(16)}`);
      await attacker.get('/dashboard/login');
      return (await attacker.post('/dashboard/login', { email: newEmail(), password: PASSWORD })).statusCode;
    };
    for (let i = 0; i < LOGIN_FAILURES_PER_ADDRESS; i += 1) expect(await attempt(i)).toBe(401);
    expect(await attempt(LOGIN_FAILURES_PER_ADDRESS)).toBe(429);
  });

  it('sends a signed-in person only to dashboard pages after sign-in', async () => {
    const { customer } = await member();
    const { email } = await anotherOwner(customer, 'Next');
    for (const [next, landing] of [
      ['/dashboard/team', '/dashboard/team'],
      ['//evil.example/dashboard', '/dashboard/apps'],
      ['https://evil.example/', '/dashboard/apps'],
      ['/dashboardevil', '/dashboard/apps'],
      ['/\\evil.example', '/dashboard/apps'],
    ]) {
      const browser = new Browser(ctx.app);
      await browser.get('/dashboard/login');
      const signedIn = await browser.post('/dashboard/login', { email, password: PASSWORD, next: next! });
      expect(signedIn.headers.location, next).toBe(landing);
    }
  });

  it('changes a password given the current one, signing out the other sessions', async () => {
    const { customer } = await member();
    const { browser: phone, email } = await anotherOwner(customer, 'Pat');
    const laptop = new Browser(ctx.app);
    await laptop.get('/dashboard/login');
    await laptop.post('/dashboard/login', { email, password: PASSWORD });
    await laptop.get('/dashboard/team');
    const wrong = await laptop.post('/dashboard/password', {
      current_password: 'not it at all',
      new_password: 'a brand new passphrase',
    });
    expect(wrong.statusCode).toBe(422);
    expect(wrong.body).toContain('current_password is not your current password');
    expect(
      (
        await laptop.post('/dashboard/password', {
          current_password: PASSWORD,
          new_password: 'a brand new passphrase',
        })
      ).statusCode,
    ).toBe(303);
    expect((await laptop.get('/dashboard/team')).statusCode).toBe(200);
    expect((await phone.get('/dashboard/team')).statusCode).toBe(303);
    const again = new Browser(ctx.app);
    await again.get('/dashboard/login');
    expect((await again.post('/dashboard/login', { email, password: PASSWORD })).statusCode).toBe(401);
    expect(
      (await again.post('/dashboard/login', { email, password: 'a brand new passphrase' })).statusCode,
    ).toBe(303);
  });

  it('counts a wrong current password as a failed sign-in of the member', async () => {
    const { customer } = await member();
    const { browser, email } = await anotherOwner(customer, 'Held');
    await browser.get('/dashboard/team');
    const change = (current: string) =>
      browser.post('/dashboard/password', {
        current_password: current,
        new_password: 'a brand new passphrase',
      });
    for (let i = 0; i < LOGIN_FAILURES_PER_EMAIL; i += 1)
      expect((await change(`guess ${i} guess ${i}`)).statusCode).toBe(422);
    // Past the email's limit, the right one too is refused until the window ends; so is a sign-in.
    expect((await change(PASSWORD)).statusCode).toBe(429);
    const elsewhere = new Browser(ctx.app);
    await elsewhere.get('/dashboard/login');
    expect((await elsewhere.post('/dashboard/login', { email, password: PASSWORD })).statusCode).toBe(429);
    ctx.clock.advance(LOGIN_WINDOW_SECONDS * 1000);
    expect((await change(PASSWORD)).statusCode).toBe(303);
  });

  it('ends sessions: signing out, from another browser, and after 12 idle hours', async () => {
    const { browser, customer } = await member();
    const { browser: second, email } = await anotherOwner(customer, 'Two');
    const laptop = new Browser(ctx.app);
    await laptop.get('/dashboard/login');
    await laptop.post('/dashboard/login', { email, password: PASSWORD });
    expect((await laptop.get('/dashboard/team')).statusCode).toBe(200);

    // Sign the laptop out from the second browser's team page.
    const rows = (await second.get('/dashboard/team')).body
      .split('<tr>')
      .filter((row) => row.includes('/dashboard/sessions/'));
    expect(rows).toHaveLength(2);
    const laptopSession = /sessions\/(dses_\w+)\/revoke/.exec(
      rows.find((row) => !row.includes('(this one)'))!,
    )![1]!;
    expect((await second.post(`/dashboard/sessions/${laptopSession}/revoke`, {})).headers.location).toBe(
      '/dashboard/team?done=session',
    );
    expect((await laptop.get('/dashboard/team')).headers.location).toMatch(/^\/dashboard\/login\?next=/);
    expect((await second.get('/dashboard/team')).statusCode).toBe(200);

    // The first browser signs itself out: the session ends and its cookie is cleared.
    await browser.get('/dashboard/apps');
    const signedOut = await browser.post('/dashboard/logout', {});
    expect(signedOut.headers.location).toBe('/dashboard/login');
    expect(signedOut.headers['set-cookie']).toMatch(/^svc_dash_session=; Path=\/dashboard; .*Max-Age=0/);
    expect((await browser.get('/dashboard/apps')).statusCode).toBe(303);

    // Idle for 12 hours: the session is over.
    const idle = await member();
    expect((await idle.browser.get('/dashboard/apps')).statusCode).toBe(200);
    ctx.clock.advance(SESSION_IDLE_MS + 1000);
    expect((await idle.browser.get('/dashboard/apps')).statusCode).toBe(303);
  });
});

describe('dashboard requests', () => {
  it('refuse a form post without its CSRF token, with another session’s, or from another origin', async () => {
    const { browser, customer } = await member();
    const other = await member();
    await browser.get(`/dashboard/apps/${customer.app.id}/keys`);
    const keysBefore = (await ctx.container.accounts.listKeys(customer.app.id)).length;
    const url = `/dashboard/apps/${customer.app.id}/keys`;
    const fields = { kind: 'secret', mode: 'test' };
    for (const refused of [
      await browser.post(url, fields, { csrf: null }),
      await browser.post(url, fields, { csrf: other.browser.csrf }),
      await browser.post(url, fields, { origin: 'https://evil.example' }),
    ]) {
      expect(refused.statusCode).toBe(403);
      expect(refused.body).toContain('security token is missing or stale');
    }
    expect(await ctx.container.accounts.listKeys(customer.app.id)).toHaveLength(keysBefore);
    expect((await browser.post(url, fields)).statusCode).toBe(201);

    // The sign-in form too: its token is tied to the browser's pre-session cookie.
    const stranger = new Browser(ctx.app);
    await stranger.get('/dashboard/login');
    expect(
      (await stranger.post('/dashboard/login', { email: 'a@b.c', password: PASSWORD }, { csrf: null }))
        .statusCode,
    ).toBe(403);
  });

  it('keep API keys and dashboard sessions apart', async () => {
    const { browser, customer } = await member();
    const withKey = await ctx.app.inject({
      method: 'GET',
      url: '/dashboard/apps',
      headers: { authorization: `Bearer ${customer.token}` },
    });
    expect(withKey.statusCode).toBe(303);
    expect(withKey.headers.location).toMatch(/^\/dashboard\/login/);
    const withSession = await ctx.app.inject({
      method: 'GET',
      url: '/v1/realtime/balance',
      headers: { cookie: `svc_dash_session=${browser.session()}` },
    });
    expect(withSession.statusCode).toBe(401);
  });

  it('show a secret key once, record its use, and revoke it after a confirmation', async () => {
    const { browser, customer } = await member('developer');
    await browser.get(`/dashboard/apps/${customer.app.id}/keys`);
    const created = await browser.post(`/dashboard/apps/${customer.app.id}/keys`, {
      kind: 'secret',
      mode: 'live',
    });
    expect(created.statusCode).toBe(201);
    const token = /(svc_live_[0-9A-Za-z]{32})/.exec(created.body)![1]!;
    const keyId = /(key_\w{20})/.exec(created.body)![1]!;
    const list = await browser.get(`/dashboard/apps/${customer.app.id}/keys?mode=live`);
    expect(list.body).not.toContain(token);
    expect(list.body).toContain(`svc_live_…${token.slice(-4)}`);
    expect(list.body).toMatch(new RegExp(`id="${keyId}"[^]*?never[^]*?active`));

    expect((await callWithKey(ctx.app, token, 'GET', '/v1/realtime/balance')).statusCode).toBe(200);
    await expect
      .poll(async () => (await browser.get(`/dashboard/apps/${customer.app.id}/keys?mode=live`)).body)
      .toMatch(
        new RegExp(
          `id="${keyId}"[^]*?<td>\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC</td>\\s*<td><span class="badge ok">`,
        ),
      );

    const asked = await browser.post(`/dashboard/apps/${customer.app.id}/keys/${keyId}/revoke?mode=live`, {});
    expect(asked.statusCode).toBe(200);
    expect(asked.body).toContain('Revoke this key?');
    expect((await callWithKey(ctx.app, token, 'GET', '/v1/realtime/balance')).statusCode).toBe(200);
    const revoked = await browser.post(`/dashboard/apps/${customer.app.id}/keys/${keyId}/revoke?mode=live`, {
      confirm: 'yes',
    });
    expect(revoked.statusCode).toBe(303);
    expect((await callWithKey(ctx.app, token, 'GET', '/v1/realtime/balance')).statusCode).toBe(401);
  });

  it('let a viewer read but not change, and keep another account’s apps out of reach', async () => {
    const { browser, customer } = await member('viewer');
    const keysPage = await browser.get(`/dashboard/apps/${customer.app.id}/keys`);
    expect(keysPage.statusCode).toBe(200);
    expect(keysPage.body).not.toContain('Create key');
    const refused = await browser.post(`/dashboard/apps/${customer.app.id}/keys`, {
      kind: 'secret',
      mode: 'test',
    });
    expect(refused.statusCode).toBe(403);
    expect(refused.body).toContain('Your role (viewer) can look but not change anything');
    expect(
      (await browser.post(`/dashboard/apps/${customer.app.id}/settings/shield-secret`, {})).statusCode,
    ).toBe(403);
    expect(
      (await browser.post('/dashboard/team/invitations', { email: newEmail(), role: 'owner' })).statusCode,
    ).toBe(403);
    expect((await browser.post('/dashboard/billing/threshold', { threshold: '5' })).statusCode).toBe(403);

    for (const [url, fields] of [
      [
        `/dashboard/apps/${customer.app.id}/webhooks`,
        { url: 'https://example.com/h', event_types: 'balance.low' },
      ],
      [`/dashboard/apps/${customer.app.id}/settings`, { max_room_size: '10' }],
      [`/dashboard/apps/${customer.app.id}/storage/obj_x/delete`, { confirm: 'yes' }],
      [`/dashboard/apps/${customer.app.id}/keys/${customer.key.id}/revoke`, { confirm: 'yes' }],
    ] as const) {
      const response = await browser.post(url, fields);
      expect(response.statusCode, url).toBe(403);
    }
    expect((await ctx.container.accounts.listKeys(customer.app.id))[0]!.revoked_at).toBeNull();

    const stranger = await createCustomer(ctx.container);
    expect((await browser.get(`/dashboard/apps/${stranger.app.id}/keys`)).statusCode).toBe(404);
  });

  it('keep each account’s people, invitations and sessions to itself', async () => {
    const ours = await member('developer');
    const theirs = await member('developer');
    await theirs.owner!.get('/dashboard/team');
    const theirInvite = await theirs.owner!.post('/dashboard/team/invitations', {
      email: newEmail(),
      role: 'viewer',
    });
    const inviteId = (
      await ctx.container.dashboard.team(
        (await ctx.container.dashboard.sessionOf(theirs.owner!.session()!))!.member,
      )
    ).invites[0]!.id;
    expect(theirInvite.statusCode).toBe(201);
    const theirMember = (await ctx.container.dashboard.sessionOf(theirs.browser.session()!))!;

    const owner = ours.owner!;
    await owner.get('/dashboard/team');
    for (const url of [
      `/dashboard/team/people/${theirMember.member.id}/role`,
      `/dashboard/team/people/${theirMember.member.id}/remove`,
      `/dashboard/team/invitations/${inviteId}/revoke`,
      `/dashboard/sessions/${theirMember.session.id}/revoke`,
    ]) {
      const response = await owner.post(url, { role: 'owner' });
      expect(response.statusCode, url).toBe(404);
    }
    expect((await theirs.browser.get('/dashboard/team')).body).toContain(
      `${theirMember.member.name} · developer`,
    );
    // Inviting someone of another account says nothing about that account.
    const taken = await owner.post('/dashboard/team/invitations', {
      email: theirMember.member.email,
      role: 'viewer',
    });
    expect(taken.statusCode).toBe(409);
    expect(taken.body).toContain('cannot be invited');
    expect(taken.body).not.toContain(theirs.customer.account.id);
  });

  it('withdraw a removed or demoted owner’s invitations', async () => {
    const { customer, browser: first } = await member();
    const { browser: second } = await anotherOwner(customer, 'Second');
    await second.get('/dashboard/team');
    const invited = await second.post('/dashboard/team/invitations', { email: newEmail(), role: 'owner' });
    const link = /\/dashboard\/invitations\/(dinv_\w+)/.exec(invited.body)![1]!;
    expect(await ctx.container.dashboard.openInvite(link)).not.toBeNull();
    const secondId = (await ctx.container.dashboard.sessionOf(second.session()!))!.member.id;
    await first.get('/dashboard/team');
    expect((await first.post(`/dashboard/team/people/${secondId}/remove`, {})).statusCode).toBe(303);
    expect(await ctx.container.dashboard.openInvite(link)).toBeNull();
    expect((await new Browser(ctx.app).get(`/dashboard/invitations/${link}`)).statusCode).toBe(404);
  });

  it('keep an owner on the account', async () => {
    const { browser, owner, customer } = await member('developer');
    const rows = (await owner!.get('/dashboard/team')).body
      .split('<tr>')
      .filter((row) => row.includes('/role"'));
    const idOf = (row: string) => /people\/(duser_\w+)\/role/.exec(row)![1]!;
    const ownerId = idOf(rows.find((row) => row.includes('(you)'))!);
    const developerId = idOf(rows.find((row) => !row.includes('(you)'))!);
    const refused = await owner!.post(`/dashboard/team/people/${ownerId}/role`, { role: 'developer' });
    expect(refused.statusCode).toBe(409);
    expect(refused.body).toContain('The account needs an owner');
    expect((await owner!.post(`/dashboard/team/people/${ownerId}/remove`, {})).statusCode).toBe(409);
    // The developer, made a viewer, can no longer create keys: the role is read on every request.
    expect(
      (await owner!.post(`/dashboard/team/people/${developerId}/role`, { role: 'viewer' })).statusCode,
    ).toBe(303);
    await browser.get(`/dashboard/apps/${customer.app.id}/keys`);
    expect(
      (await browser.post(`/dashboard/apps/${customer.app.id}/keys`, { kind: 'secret', mode: 'test' }))
        .statusCode,
    ).toBe(403);
    // Removed, they are signed out everywhere.
    expect((await owner!.post(`/dashboard/team/people/${developerId}/remove`, {})).statusCode).toBe(303);
    expect((await browser.get('/dashboard/apps')).statusCode).toBe(303);
  });

  it('show the usage of 1-90 days, and say so past them', async () => {
    const { browser } = await member('viewer');
    for (const days of ['1', '90'])
      expect((await browser.get(`/dashboard/usage?days=${days}`)).statusCode).toBe(200);
    for (const days of ['0', '91', 'x']) {
      const refused = await browser.get(`/dashboard/usage?days=${days}`);
      expect(refused.statusCode).toBe(422);
      expect(refused.body).toContain('days must be a whole number 1-90');
    }
  });

  it('set the balance.low threshold, owners only, in dollars', async () => {
    const { browser, customer } = await member();
    await browser.get('/dashboard/billing');
    const bad = await browser.post('/dashboard/billing/threshold', { threshold: 'ten' });
    expect(bad.statusCode).toBe(422);
    expect(bad.body).toContain('threshold must be an amount of dollars');
    expect((await browser.post('/dashboard/billing/threshold', { threshold: '$12.50' })).statusCode).toBe(
      303,
    );
    expect(await ctx.container.billing.lowBalanceThreshold(customer.account.id)).toBe(12_500_000);
    expect((await browser.get('/dashboard/billing')).body).toContain('$12.50');
    expect((await browser.post('/dashboard/billing/threshold', { threshold: '' })).statusCode).toBe(303);
    expect(await ctx.container.billing.lowBalanceThreshold(customer.account.id)).toBeNull();
  });

  it('tell a live app its balance fell under the account’s own threshold, above the operator’s default', async () => {
    const customer = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 10_000_000 });
    await ctx.container.webhooks.create(
      { appId: customer.app.id, mode: 'live' },
      { url: 'https://hooks.example.com/balance', event_types: ['balance.low'] },
    );
    const { browser } = await member('owner', customer);
    const told = () =>
      ctx.container.pool.anyFirst(
        sql.unsafe`select body from webhook_events where app_id = ${customer.app.id} and type = 'balance.low'`,
      );
    // $10 is above the default ($1 on the test stack): nothing to tell.
    await ctx.container.billing.notifyLowBalances(parseUsd(ctx.container.settings.SVC_BALANCE_LOW_USD));
    expect(await told()).toHaveLength(0);
    await browser.get('/dashboard/billing');
    expect((await browser.post('/dashboard/billing/threshold', { threshold: '12.5' })).statusCode).toBe(303);
    // The test stack's control plane runs the same check: whichever process finds the fall tells it.
    await ctx.container.billing.notifyLowBalances(parseUsd(ctx.container.settings.SVC_BALANCE_LOW_USD));
    const events = (await told()).map((body) => JSON.parse(body as string));
    expect(events).toHaveLength(1);
    expect(events[0].data).toMatchObject({ balance_micros: 10_000_000, threshold_micros: 12_500_000 });
    // 0 turns it off: a later fall is not told.
    await browser.post('/dashboard/billing/threshold', { threshold: '0' });
    await ctx.container.billing.notifyLowBalances(parseUsd(ctx.container.settings.SVC_BALANCE_LOW_USD));
    expect(await told()).toHaveLength(1);
  });

  it('count the app’s organisations, businesses and circles per mode, deleted ones left out', async () => {
    const world = await appWithUsers(ctx);
    const { browser } = await member('viewer', world);
    const ada = await world.user('ada');
    for (const externalId of ['north', 'south'])
      expect((await world.asApp('POST', '/v1/orgs', { externalId, name: externalId })).statusCode).toBe(201);
    expect((await world.asApp('DELETE', '/v1/orgs/south')).statusCode).toBe(200);
    expect((await ada.call('POST', '/v1/me/businesses', { name: 'Acme' })).statusCode).toBe(201);
    for (const name of ['Book club', 'Chess'])
      expect((await ada.call('POST', '/v1/me/circles', { name })).statusCode).toBe(201);
    const figures = async (mode: string) => {
      const page = (await browser.get(`/dashboard/apps/${world.app.id}?mode=${mode}`)).body;
      return [...page.matchAll(/<p class="figure">(\d+)<\/p><p>(?:<a [^>]+>)?([a-z ]+)/g)].map(
        (m) => `${m[2]} ${m[1]}`,
      );
    };
    // The secret key, and the publishable key the app's realtime settings were made with.
    expect(await figures('test')).toEqual(['active keys 2', 'organisations 1', 'businesses 1', 'circles 2']);
    expect(await figures('live')).toEqual(['active keys 0', 'organisations 0', 'businesses 0', 'circles 0']);
  });
});
