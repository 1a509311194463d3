/**
 * A circle at community scale, through the whole HTTP pipeline of one process on the test stack.
 *
 *   1. A circle (open) grows to `members` members, each joining by its code at once (`concurrency` in
 *      flight): joins per second and the time to the full size. Beside it, in turns, the floor of the
 *      cheapest write a user makes (POST /v1/me/code: a transaction of its own, no server).
 *   2. At that size, with `rooms` rooms and boards: a role change, a block and a restore, each timed
 *      (each is one call to ejabberd whatever the size).
 *   3. An announcement's fan-out: for each N of `fanouts`, N members online and in the board, and in
 *      a plain room of the same org that ejabberd's API made (not a circle's room: nothing asks the
 *      control plane about it). A mod posts `posts` messages into each, in turns; delivered messages
 *      per second to the same clients, and the ratio board / plain room (goal ≥ 0.9).
 *
 *   npm run stack -- up --profile test && npx tsx bench/circles.ts [members] [rooms] [concurrency] [fanouts] [posts]
 *   e.g. npx tsx bench/circles.ts 10000 50 32 100,1000 20
 */
import { circleNick } from '../control-plane/src/modules/orgs/circles.js';
import { ejabberdAsOperator } from '../control-plane/test/support.js';
import { type ChatSession, connect, enter, post, type roomMessage } from '../e2e/support/xmpp.js';
import { appWithUsers } from './app-users.js';
import { figures, latencyLine, type Run, secondsSince, timed } from './support.js';

const members = Number(process.argv[2] ?? 10_000);
const roomCount = Number(process.argv[3] ?? 50);
const concurrency = Number(process.argv[4] ?? 32);
const fanouts = (process.argv[5] ?? '100,1000').split(',').map(Number);
const posts = Number(process.argv[6] ?? 20);
const { settings, secretKey, call, users, close } = await appWithUsers({
  concurrency,
  log: Boolean(process.env.BENCH_LOG),
});
// Rooms big enough for everyone who comes.
await call('PATCH', '/v1/realtime/app', secretKey, { max_room_size: Math.max(...fanouts) + 10 });

const line = (label: string, run: Run | Run[]) => {
  const f = figures(Array.isArray(run) ? run : [run]);
  return `  ${label.padEnd(52)} ${f.perSecond.toFixed(0).padStart(6)}/s  ${latencyLine(f)}`;
};

console.log(
  `circles: ${members} members, ${roomCount} rooms and boards, ${concurrency} in flight; fan-out to ${fanouts.join(', ')} online members, ${posts} posts each; node ${process.version}`,
);
const [owner] = await users('owner', 0, 1);
const circle = (
  await call('POST', '/v1/me/circles', owner!, { name: 'Bench club', join_rule: 'open' })
).json();
const base = `/v1/me/circles/${circle.id}`;
for (let i = circle.boards.length + circle.rooms.length; i < roomCount; i++)
  await call('POST', `${base}/rooms`, owner!, { kind: 'room', name: `Room ${i}` });

// ----- 1. growing to full size -------------------------------------------------------------------

console.log(`\n1. ${members - 1} people joining by the code (4 rounds in turns with the floor)`);
const people = await users('member', 0, members - 1);
const memberIds: string[] = [];
const joins: Run[] = [];
const floors: Run[] = [];
const started = performance.now();
let joined = 0;
for (let round = 0; round < 4; round++) {
  const share = Math.ceil((members - 1) / 4);
  const count = Math.min(share, members - 1 - joined);
  joins.push(
    await timed(count, concurrency, async () => {
      const k = joined++;
      const answer = (await call('POST', `/v1/me/codes/${circle.code}/join`, people[k]!, {})).json();
      memberIds[k] = answer.member_id;
    }),
  );
  let floorNext = 0;
  floors.push(
    await timed(count, concurrency, () =>
      call('POST', '/v1/me/code', people[floorNext++ % people.length]!, {}),
    ),
  );
}
const joinTime = joins.reduce((sum, run) => sum + run.elapsed, 0) / 1000;
console.log(line('join by code (open rule)', joins));
console.log(line('floor: POST /v1/me/code', floors));
console.log(
  `  ratio join / floor: ${(figures(joins).perSecond / figures(floors).perSecond).toFixed(2)}; a ${members}-member circle made in ${joinTime.toFixed(1)} s of joins (${secondsSince(started)} s with the floor's turns)`,
);

// ----- 2. changes at full size ---------------------------------------------------------------------

console.log(`\n2. changes at ${members} members and ${roomCount} rooms and boards`);
const someone = memberIds[memberIds.length - 1]!;
const timeOf = async (label: string, change: () => Promise<unknown>) => {
  const at = performance.now();
  await change();
  console.log(`  ${label.padEnd(52)} ${(performance.now() - at).toFixed(0).padStart(6)} ms`);
};
await timeOf('make a member mod', () => call('PATCH', `${base}/members/${someone}`, owner!, { role: 'mod' }));
await timeOf('block a member (out of every room)', () =>
  call('PATCH', `${base}/members/${someone}`, owner!, { status: 'blocked' }),
);
await timeOf('restore them', () => call('PATCH', `${base}/members/${someone}`, owner!, { status: 'active' }));
await timeOf('a new board (every member’s bookmarks)', () =>
  call('POST', `${base}/rooms`, owner!, { kind: 'board', name: 'Results' }),
);

// ----- 3. an announcement's fan-out --------------------------------------------------------------

console.log(`\n3. one announcement's fan-out (${posts} posts per round, 4 rounds each, in turns)`);
const board = circle.boards[0]!.jid as string;
const [service] = board.split('@').slice(1);
const plainName = `${board.split('@')[0]!.replace(/r\+[a-z0-9]+$/, '')}benchplain`;
const plain = `${plainName}@${service}`;
await ejabberdAsOperator(settings, 'create_room_with_opts', {
  name: plainName,
  service,
  host: settings.SVC_CHAT_DOMAIN,
  options: [
    { name: 'persistent', value: 'true' },
    { name: 'members_only', value: 'false' },
    { name: 'max_users', value: String(Math.max(...fanouts) + 10) },
    { name: 'presence_broadcast', value: '[moderator]' },
  ],
});
await call('PATCH', `${base}/members/${memberIds[0]}`, owner!, { role: 'mod' });
const credentialOf = async (k: number) => {
  const memberships = (await call('GET', '/v1/me/org-memberships', people[k]!)).json().items;
  return (
    await call('POST', `/v1/me/org-memberships/${memberships[0].id}/chat-token`, people[k]!, {})
  ).json();
};
const online: ChatSession[] = [];
/** Enters both rooms under the member's tagged nickname (a circle's rooms take no other). */
const enterBoth = async (session: ChatSession, name: string) => {
  const nick = circleNick(name, session.credential.user.split('@')[0]!.split('.')[2]!);
  for (const room of [board, plain])
    if ((await enter(session, room, nick)).attrs.type === 'error')
      throw new Error(`${nick} cannot enter ${room}`);
  return nick;
};
const sender = await connect(await credentialOf(0));
const senderNick = await enterBoth(sender, 'Sender');
const ratios: string[] = [];
for (const n of fanouts) {
  let next = online.length;
  await timed(n - online.length, 16, async () => {
    const k = 1 + next++;
    const session = await connect(await credentialOf(k));
    await enterBoth(session, `m${k}`);
    online.push(session);
  });
  const round = async (room: string) => {
    const listeners = online.map((session) => {
      let heard = 0;
      return new Promise<void>((resolve) => {
        const onStanza = (stanza: Parameters<ReturnType<typeof roomMessage>>[0]) => {
          if (stanza.is('message') && stanza.attrs.from === `${room}/${senderNick}` && ++heard === posts) {
            session.xmpp.removeListener('stanza', onStanza);
            resolve();
          }
        };
        session.xmpp.on('stanza', onStanza);
      });
    });
    const at = performance.now();
    for (let i = 0; i < posts; i++) await post(sender, room, `Announcement ${i}`);
    await Promise.all(listeners);
    return (online.length * posts) / ((performance.now() - at) / 1000);
  };
  const rates = { board: [] as number[], plain: [] as number[] };
  for (let turn = 0; turn < 4; turn++) {
    rates.board.push(await round(board));
    rates.plain.push(await round(plain));
  }
  const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
  const ratio = mean(rates.board) / mean(rates.plain);
  console.log(
    `  ${String(n).padStart(5)} online: board ${mean(rates.board).toFixed(0)} delivered/s, plain room ${mean(rates.plain).toFixed(0)}/s, ratio ${ratio.toFixed(2)}`,
  );
  ratios.push(`${n}: ${ratio.toFixed(2)}`);
}
console.log(`  ratios board / plain room (goal ≥ 0.9): ${ratios.join(', ')}`);

await Promise.all([sender, ...online].map((session) => session.stop()));
await ejabberdAsOperator(settings, 'destroy_room', { name: plainName, service });
await close();
