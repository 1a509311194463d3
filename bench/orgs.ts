/**
 * Orgs at scale, through the whole HTTP pipeline of one process on the test stack.
 *
 * An org of `members` members in `teams` teams (policy teams), made through the API and timed: its
 * teams (a members-only room each on ejabberd), then its members, each in a team in turn and a fifth
 * of them in a second one at random (some 24 a team at the default sizes, each team's affiliation set
 * on ejabberd), 1% admins, 5% guests, and up to 200 of them linked to app users (bench-user-<k>).
 *
 * Then, with `concurrency` calls in flight, `calls` calls each (after a discarded warm-up):
 *   GET /v1/orgs/{org}/members, first pages and second pages by their cursor;
 *   GET /v1/orgs/{org}/members/{ext_id}/directory of random members, first page;
 *   GET /v1/me/org-memberships with the linked users' tokens.
 *
 * Last, what an org identity's login costs beside a personal one: as many credentials of each (the
 * same app), logged in on the test stack's ejabberd as bench/chat-logins.ts does, the two kinds in
 * turns (three rounds each) so that the drift of a shared machine hits both alike.
 *
 *   npm run stack -- up --profile test && npx tsx bench/orgs.ts [members] [teams] [calls] [concurrency]
 */
import { randomBytes, randomInt } from 'node:crypto';
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { createCustomer } from '../control-plane/test/support.js';
import { type ChatCredential, connect } from '../e2e/support/xmpp.js';
import {
  type Figures,
  figures,
  injectOk,
  latencyLine,
  type Run,
  secondsSince,
  timed,
  useTestStackSettings,
} from './support.js';

useTestStackSettings();
const members = Number(process.argv[2] ?? 10_000);
const teams = Number(process.argv[3] ?? 500);
const calls = Number(process.argv[4] ?? 2_000);
const concurrency = Number(process.argv[5] ?? 16);
const container = await createContainer(loadSettings(process.env));
const app = await buildApp(container, { logger: false });
await app.ready();
// A run makes over 20,000 calls with one key: a cap of its own, so that runs of a day never reach it.
const customer = await createCustomer(container, { plan: 'scale', dailyRequestCap: 100_000_000 });
const secretKey = { authorization: `Bearer ${customer.token}` };

/** A call through the app from an address of its own; anything but a success ends the bench. */
const call = injectOk.bind(null, app);

const line = (label: string, f: Figures) =>
  `  ${label.padEnd(62)} ${f.perSecond.toFixed(0).padStart(6)}/s  ${latencyLine(f)}`;
const goal = (f: Figures) => `  goal p95 < 20 ms: ${f.p95 < 20 ? 'met' : 'NOT met'}`;

// ----- the org ------------------------------------------------------------------------------------

const ORG = 'bench-org';
/**
 * Every write of an org's teams and members holds the org's row (select … for update) until it
 * commits, ejabberd's room and affiliation calls included: the writes go one at a time whatever the
 * concurrency. A few in flight keep the next one waiting at the lock, and no more connections.
 */
const CREATION_CONCURRENCY = 4;
const LINKED_USERS = Math.min(200, members);
/** The members linked to app users, spread over the org: member index → user index. */
const linked = new Map(
  Array.from({ length: LINKED_USERS }, (_, k) => [Math.floor(((k + 0.5) * members) / LINKED_USERS), k]),
);
const teamId = (j: number) => `t${j}`;
const memberId = (i: number) => `m${i}`;
const userId = (k: number) => `bench-user-${k}`;

function memberTeams(i: number): string[] {
  const first = i % teams;
  if (i % 5 !== 0 || teams < 2) return [teamId(first)];
  return [teamId(first), teamId((first + 1 + randomInt(teams - 1)) % teams)];
}

function memberWrite(i: number) {
  const user = linked.get(i);
  return {
    role: i % 100 === 0 ? 'admin' : i % 20 === 1 ? 'guest' : 'member',
    teams: memberTeams(i),
    ...(user === undefined ? {} : { user_id: userId(user) }),
  };
}

const creation = (label: string, run: Run) => {
  const f = figures([run]);
  return `  ${label}: ${run.latencies.length} in ${(run.elapsed / 1000).toFixed(1)} s = ${f.perSecond.toFixed(1)}/s  ${latencyLine(f)}`;
};

console.log(
  `orgs: ${members} members in ${teams} teams; ${calls} calls a measure, ${concurrency} in flight, node ${process.version}`,
);
console.log(`making the org (${CREATION_CONCURRENCY} writes in flight)`);
await call('POST', '/v1/orgs', secretKey, { externalId: ORG, name: 'Bench org', policy: 'teams' });
let teamsMade = 0;
const teamRun = await timed(teams, CREATION_CONCURRENCY, () => {
  const j = teamsMade++;
  return call('PUT', `/v1/orgs/${ORG}/teams/${teamId(j)}`, secretKey, { name: `Team ${j}` });
});
console.log(creation('teams (PUT …/teams/{ext_id})', teamRun));
let membersStarted = 0;
let membersMade = 0;
const started = performance.now();
const memberRun = await timed(members, CREATION_CONCURRENCY, async () => {
  const i = membersStarted++;
  await call('PUT', `/v1/orgs/${ORG}/members/${memberId(i)}`, secretKey, memberWrite(i));
  membersMade += 1;
  if (membersMade % 1_000 === 0) console.log(`    ${membersMade} of ${members} (${secondsSince(started)} s)`);
});
console.log(creation('members (PUT …/members/{ext_id})', memberRun));

// ----- reads --------------------------------------------------------------------------------------

const WARM_UP = Math.min(200, calls);

/**
 * A read's answer time alone (1 in flight: the goal is judged on it), then its throughput with
 * `concurrency` in flight, where the latency is mostly the queue of one process on a shared machine.
 */
async function measure(label: string, request: () => Promise<unknown>) {
  await timed(WARM_UP, concurrency, request);
  const alone = figures([await timed(Math.ceil(calls / 4), 1, request)]);
  console.log(line(`${label}, 1 in flight`, alone) + goal(alone));
  console.log(
    line(`${label}, ${concurrency} in flight`, figures([await timed(calls, concurrency, request)])),
  );
}

console.log(`\nreads (${WARM_UP} calls of warm-up each)`);
// Newest first: every first page is the same, and so is the cursor to the second.
let cursor = '';
await measure('GET …/members, first page', async () => {
  const page: { next_cursor: string | null } = (
    await call('GET', `/v1/orgs/${ORG}/members?limit=50`, secretKey)
  ).json();
  cursor = page.next_cursor ?? '';
});
await measure('GET …/members, second page', () =>
  call('GET', `/v1/orgs/${ORG}/members?limit=50&cursor=${encodeURIComponent(cursor)}`, secretKey),
);
await measure('GET …/members/{ext_id}/directory, first page', () =>
  call('GET', `/v1/orgs/${ORG}/members/${memberId(randomInt(members))}/directory?limit=50`, secretKey),
);
// The users' tokens are minted once, before the measure.
const userTokens = await Promise.all(
  Array.from({ length: LINKED_USERS }, async (_, k) => {
    const minted: { token: string } = (
      await call('POST', `/v1/users/${userId(k)}/tokens`, secretKey, {})
    ).json();
    return { authorization: `Bearer ${minted.token}` };
  }),
);
let asked = 0;
await measure('GET /v1/me/org-memberships', () =>
  call('GET', '/v1/me/org-memberships?limit=50', userTokens[asked++ % LINKED_USERS]!),
);

// ----- logins -------------------------------------------------------------------------------------

const LOGINS = Math.min(400, members);
const LOGIN_ROUNDS = 3;
console.log(
  `\nlogins: ${LOGINS} credentials of each kind, ${LOGIN_ROUNDS} rounds in turns, ${concurrency} in flight`,
);
/** Mints a credential for each of `count` identities, timed. */
async function mint(label: string, count: number, minted: (k: number) => Promise<ChatCredential>) {
  const credentials: ChatCredential[] = [];
  let next = 0;
  const run = await timed(count, concurrency, async () => {
    const k = next++;
    credentials[k] = await minted(k);
  });
  console.log(line(label, figures([run])));
  return credentials;
}
// The org identities spread over the org; the personal ones are other users of the same app.
const orgCredentials = await mint('credentials, org (POST …/chat-token)', LOGINS, async (k) =>
  (
    await call(
      'POST',
      `/v1/orgs/${ORG}/members/${memberId(Math.floor((k * members) / LOGINS))}/chat-token`,
      secretKey,
      {},
    )
  ).json(),
);
const personalCredentials = await mint('credentials, personal (POST …/chat/tokens)', LOGINS, async (k) =>
  (await call('POST', '/v1/realtime/chat/tokens', secretKey, { user_id: `bench-person-${k}` })).json(),
);

/**
 * A login is over once its session is online. Its close is not waited for: ejabberd 23.01 answers a
 * client's stream close only after a fixed 100 ms pause (ejabberd_c2s:bounce_message_queue), idle
 * time that would cap both kinds alike at `concurrency` / 0.1 s. The closes still run on the server
 * meanwhile, and each run waits for all of its sessions to be closed before the next one.
 */
const closing: Promise<void>[] = [];
const login = async (credential: ChatCredential) => {
  const session = await connect(credential, `r${randomBytes(4).toString('hex')}`);
  closing.push(session.stop());
};

/** A login with each of the first `count` credentials, timed; then their sessions closed. */
async function logins(credentials: ChatCredential[], count = credentials.length): Promise<Run> {
  let next = 0;
  const run = await timed(count, concurrency, () => login(credentials[next++]!));
  await Promise.all(closing.splice(0));
  return run;
}

const LOGIN_WARM_UP = Math.min(50, LOGINS);
await logins(orgCredentials, LOGIN_WARM_UP);
await logins(personalCredentials, LOGIN_WARM_UP);
const orgRuns: Run[] = [];
const personalRuns: Run[] = [];
for (let round = 0; round < LOGIN_ROUNDS; round += 1) {
  orgRuns.push(await logins(orgCredentials));
  personalRuns.push(await logins(personalCredentials));
}
const orgLogins = figures(orgRuns);
const personalLogins = figures(personalRuns);
console.log(line('logins, org identities', orgLogins));
console.log(line('logins, personal identities', personalLogins));
// Both ratios read as what an org login costs in personal logins.
console.log(
  `  ratio of throughput personal / org ${(personalLogins.perSecond / orgLogins.perSecond).toFixed(2)}×,` +
    ` of p50 latency org / personal ${(orgLogins.p50 / personalLogins.p50).toFixed(2)}×` +
    ' (org login <= 1.2x a personal login wanted)',
);

await app.close();
await container.close();
