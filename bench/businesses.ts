/**
 * A business's public chat at scale, through the whole HTTP pipeline of one process on the test stack.
 *
 * A business with `staff` people working its inbox besides its owner. Then:
 *   1. `customers` customers open a chat by its code at once (`concurrency` in flight): each makes a
 *      conversation row and its room on ejabberd with the customer and the staff in it (one
 *      svc_open_conversation call). Beside it, in turns, its floors: the same number of rooms made by
 *      ejabberd alone (svc_open_conversation straight to its API, as the control plane calls it),
 *      and of the cheapest write a user makes (POST /v1/me/code: a transaction of its own, no server).
 *   2. More customers until the inbox holds `conversations` conversations, then a staff member's
 *      listing of them (GET /v1/me/businesses/{org}/conversations, first and second pages), alone and
 *      with `concurrency` in flight, beside the floor of a user-token read (GET /v1/me/code).
 *   3. One more person put on the inbox's staff (PUT …/inboxes/{inbox}/staff): the change applied to
 *      every conversation room at once, timed.
 *
 *   npm run stack -- up --profile test && npx tsx bench/businesses.ts [customers] [conversations] [staff] [concurrency]
 */
import { ejabberdAsOperator } from '../control-plane/test/support.js';
import { appWithUsers } from './app-users.js';
import { figures, latencyLine, type Run, secondsSince, timed } from './support.js';

const customers = Number(process.argv[2] ?? 1_000);
const conversations = Math.max(customers, Number(process.argv[3] ?? 10_000));
const staffCount = Number(process.argv[4] ?? 3);
const concurrency = Number(process.argv[5] ?? 32);
const { settings: stack, container, customer, call, users, close } = await appWithUsers({ concurrency });

const line = (label: string, run: Run | Run[]) => {
  const f = figures(Array.isArray(run) ? run : [run]);
  return `  ${label.padEnd(58)} ${f.perSecond.toFixed(0).padStart(6)}/s  ${latencyLine(f)}`;
};

console.log(
  `businesses: ${customers} customers at once, ${conversations} conversations, ${staffCount} staff besides the owner; ${concurrency} in flight, node ${process.version}`,
);
const [owner] = await users('owner', 0, 1);
const business: { id: string; code: string; inbox: { id: string } } = (
  await call('POST', '/v1/me/businesses', owner!, { name: 'Bench shop' })
).json();
const base = `/v1/me/businesses/${business.id}`;
const staff = await users('staff', 0, staffCount + 1);
for (const person of staff.slice(0, staffCount)) {
  const { code } = (await call('GET', '/v1/me/code', person)).json();
  const invite = (await call('POST', `${base}/members`, owner!, { code })).json();
  await call('POST', `/v1/me/org-invites/${invite.id}/accept`, person, {});
}

// ----- 1. customers opening chats at once ---------------------------------------------------------

console.log(`\n1. opening chats (${customers} customers, 3 rounds in turns with the floors)`);
const ROUNDS = 3;
const perRound = Math.ceil(customers / ROUNDS);
const customerTokens = await users('customer', 0, perRound * ROUNDS);
const settings = await container.realtime.ensure({ appId: customer.app.id, mode: 'test' });
const roomMembers = Array.from({ length: staffCount + 1 }, (_, k) => ({
  jid: `${settings.chat_prefix}.bench-staff-${k}@${process.env.SVC_CHAT_DOMAIN}`,
  nick: `Bench shop (${k + 1})`,
}));
let opened = 0;
let direct = 0;
let floorCalls = 0;
const openRuns: Run[] = [];
const directRuns: Run[] = [];
const floorRuns: Run[] = [];
for (let round = 0; round < ROUNDS; round += 1) {
  openRuns.push(
    await timed(perRound, concurrency, () =>
      call('POST', `/v1/me/codes/${business.code}/chat`, customerTokens[opened++]!, { name: 'Customer' }),
    ),
  );
  directRuns.push(
    await timed(perRound, concurrency, () => {
      const k = direct++;
      return container.ejabberd.openConversation(
        `${settings.chat_prefix}.+benchfloor00.c+${String(k).padStart(10, '0')}`,
        {
          title: 'Floor',
          description: '',
          subject: '',
          maxUsers: settings.max_room_size,
          members: [
            { jid: `${settings.chat_prefix}.floor-${k}@${process.env.SVC_CHAT_DOMAIN}`, nick: 'Customer' },
            ...roomMembers,
          ],
        },
      );
    }),
  );
  floorRuns.push(
    await timed(perRound, concurrency, () =>
      call('POST', '/v1/me/code', customerTokens[floorCalls++ % customerTokens.length]!, {}),
    ),
  );
}
const opens = figures(openRuns);
console.log(line('POST /v1/me/codes/{code}/chat (a new conversation)', openRuns));
console.log(line('floor: svc_open_conversation alone (ejabberd)', directRuns));
console.log(line('floor: POST /v1/me/code (a user’s write, no server)', floorRuns));
console.log(
  `  conversations opened ${opens.perSecond.toFixed(0)}/s, p95 ${opens.p95.toFixed(1)} ms;` +
    ` ratio of throughput to ejabberd alone ${(opens.perSecond / figures(directRuns).perSecond).toFixed(2)}×,` +
    ` to the write floor ${(opens.perSecond / figures(floorRuns).perSecond).toFixed(2)}×`,
);

// ----- 2. the inbox listing at `conversations` conversations ---------------------------------------

const more = conversations - opened;
if (more > 0) {
  console.log(`\n2. ${more} more conversations`);
  const moreTokens = await users('customer', opened, more);
  let next = 0;
  const started = performance.now();
  const run = await timed(more, concurrency, async () => {
    await call('POST', `/v1/me/codes/${business.code}/chat`, moreTokens[next++]!, { name: 'Customer' });
    if (next % 2_000 === 0) console.log(`    ${next} of ${more} (${secondsSince(started)} s)`);
  });
  console.log(line('POST /v1/me/codes/{code}/chat', run));
}
const READS = 2_000;
const reader = staff[0]!;
let cursor = '';
const firstPage = async () => {
  const page: { next_cursor: string | null } = (
    await call('GET', `${base}/conversations?limit=50`, reader)
  ).json();
  cursor = page.next_cursor ?? '';
};
const secondPage = () =>
  call('GET', `${base}/conversations?limit=50&cursor=${encodeURIComponent(cursor)}`, reader);
const codeRead = () => call('GET', '/v1/me/code', reader);
await timed(200, concurrency, firstPage);
await timed(200, concurrency, codeRead);
console.log(
  `\n   a staff member’s listing at ${conversations} conversations (1 in flight, then ${concurrency})`,
);
const alone: Record<string, Run[]> = { first: [], second: [], floor: [] };
for (let round = 0; round < ROUNDS; round += 1) {
  alone.first!.push(await timed(READS / 4 / ROUNDS, 1, firstPage));
  alone.second!.push(await timed(READS / 4 / ROUNDS, 1, secondPage));
  alone.floor!.push(await timed(READS / 4 / ROUNDS, 1, codeRead));
}
const listing = figures(alone.first!);
console.log(line('GET …/conversations, first page, 1 in flight', alone.first!));
console.log(line('GET …/conversations, second page, 1 in flight', alone.second!));
console.log(line('floor: GET /v1/me/code, 1 in flight', alone.floor!));
console.log(
  line(
    `GET …/conversations, first page, ${concurrency} in flight`,
    await timed(READS, concurrency, firstPage),
  ),
);
console.log(
  `  listing p95 ${listing.p95.toFixed(2)} ms (goal < 20 ms: ${listing.p95 < 20 ? 'met' : 'NOT met'});` +
    ` ratio of p50 to the floor ${(listing.p50 / figures(alone.floor!).p50).toFixed(2)}×`,
);

// ----- 3. a staff change applied to every room ----------------------------------------------------

const newcomer = staff[staffCount]!;
const { code } = (await call('GET', '/v1/me/code', newcomer)).json();
const invite = (await call('POST', `${base}/members`, owner!, { code })).json();
const accepting = performance.now();
await call('POST', `/v1/me/org-invites/${invite.id}/accept`, newcomer, {});
const accepted = performance.now() - accepting;
const { items: inboxes } = (await call('GET', `${base}/inboxes`, owner!)).json();
const without = inboxes[0].staff
  .filter((entry: { member_id: string }) => entry.member_id !== invite.id)
  .map((entry: { member_id: string; may_reply: boolean }) => ({
    member_id: entry.member_id,
    may_reply: entry.may_reply,
  }));
const removing = performance.now();
await call('PUT', `${base}/inboxes/${business.inbox.id}/staff`, owner!, { staff: without });
const removed = performance.now() - removing;
console.log(
  `\n3. one person onto the inbox (an accepted invite) at ${conversations} rooms: ${(accepted / 1000).toFixed(2)} s` +
    ` (${((accepted * 1000) / conversations).toFixed(0)} µs a room); off it (PUT …/staff): ${(removed / 1000).toFixed(2)} s`,
);

// ----- cleaning up -----------------------------------------------------------------------------------

// The rooms are persistent (a deleted business keeps its history): the bench's own are destroyed, so
// that runs do not pile tens of thousands of rooms onto the test stack's ejabberd.
const benchRooms = Array.from(
  { length: direct },
  (_, k) => `${settings.chat_prefix}.+benchfloor00.c+${String(k).padStart(10, '0')}@x`,
);
for (let page = ''; ; ) {
  const listed: { items: { jid: string }[]; next_cursor: string | null } = (
    await call(
      'GET',
      `${base}/conversations?limit=100${page && `&cursor=${encodeURIComponent(page)}`}`,
      owner!,
    )
  ).json();
  benchRooms.push(...listed.items.map((item) => item.jid));
  if (listed.next_cursor === null) break;
  page = listed.next_cursor;
}
let destroyed = 0;
await timed(benchRooms.length, 8, () =>
  ejabberdAsOperator(stack, 'destroy_room', {
    name: benchRooms[destroyed++]!.split('@')[0],
    service: stack.SVC_CHAT_MUC_DOMAIN,
  }),
);
console.log(`
(${benchRooms.length} rooms of the bench destroyed)`);

await close();
