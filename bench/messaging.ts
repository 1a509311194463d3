/**
 * In-app OTPs on the test stack's ejabberd: codes delivered per second end to end (POST /v1/otp/send
 * through one process's whole pipeline → the component → a message at a connected xmpp.js client),
 * beside its floor, plain messages per second between two xmpp.js clients on the same server, each
 * measured from send to arrival with the same number in flight; then verifications per second
 * (POST /v1/otp/verify of each recipient's latest code).
 *
 * Two more paths say where the difference goes: the same deliveries through a component connection
 * of its own without the API (the server's part), and floor (a) of bench/core.ts, one INSERT in one
 * transaction through the same app (the least an API call that records something costs here).
 *
 * A recipient takes 3 codes in 10 minutes, so the codes go to `recipients` connected users, one each
 * per round; the paths take three rounds in turns so that the drift of a shared machine hits all.
 * Before them, every path runs its three rounds on a group of warm-up recipients of its own: measured
 * cold, 200 recipients' 600 calls charged the JIT's compiling to the paths (an OTP's node CPU read
 * 4.97 ms, 1.80 ms once warm; floor (a)'s 1.50 ms, 0.29 ms warm).
 *
 *   npm run stack -- up --profile test && npx tsx bench/messaging.ts [recipients] [concurrency]
 */
import { xml } from '@xmpp/client';
import type { Element } from '@xmpp/xml';
import { createMessagingComponent } from '../control-plane/src/adapters/messaging-component.js';
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { MESSAGING_LIMITS } from '../control-plane/src/modules/messaging/schema.js';
import { mountFloors } from '../control-plane/test/floors.js';
import { createCustomer } from '../control-plane/test/support.js';
import { type ChatCredential, type ChatSession, connect } from '../e2e/support/xmpp.js';
import { type Cpu, cpuLine, cpuMeter, noCpu } from './cpu.js';
import {
  type Figures,
  figures,
  injectOk,
  inTurns,
  latencyLine,
  type Run,
  timed,
  useTestStackSettings,
} from './support.js';

useTestStackSettings();
const recipients = Number(process.argv[2] ?? 1_000);
/** Recipients of the warm-up rounds: 1,500 calls of each path before any is measured. */
const WARM_UP_RECIPIENTS = 500;
const concurrency = Number(process.argv[3] ?? 16);
const ROUNDS = MESSAGING_LIMITS.otpPerRecipientShort.limit;
const settings = loadSettings(process.env);
const container = await createContainer(settings);
const app = await buildApp(container, { logger: false });
await mountFloors(app, container);
await app.ready();
const component = createMessagingComponent({
  url: settings.SVC_MESSAGING_COMPONENT_URL,
  domain: settings.SVC_MESSAGING_DOMAIN,
  secret: settings.SVC_MESSAGING_COMPONENT_SECRET,
  chatDomain: settings.SVC_CHAT_DOMAIN,
  onError: (error) => console.error(error),
});
await component.start();
const customer = await createCustomer(container);
const headers = { authorization: `Bearer ${customer.token}` };

const credential = async (userId: string): Promise<ChatCredential> =>
  (await injectOk(app, 'POST', '/v1/realtime/chat/tokens', headers, { user_id: userId })).json();
const sessions: ChatSession[] = [];
const online = async (userId: string) => {
  const session = await connect(await credential(userId));
  sessions.push(session);
  return session;
};
console.log(
  `in-app OTPs: ${recipients} recipients, ${ROUNDS} rounds, ${concurrency} in flight, after a warm-up on ${WARM_UP_RECIPIENTS} others`,
);
/** Recipients connected at once, `count` of them named from `name`. */
async function group(name: string, count: number) {
  const users = Array.from({ length: count }, (_, i) => `${name}-${i}`);
  const connected: ChatSession[] = [];
  let next = 0;
  await timed(count, concurrency, async () => {
    const i = next++;
    connected[i] = await online(users[i]!);
  });
  return { users, sessions: connected };
}
const warmUpGroup = await group('otp-warm-up', WARM_UP_RECIPIENTS);
const measuredGroup = await group('otp-bench', recipients);
const [sender, receiver] = [await online('plain-sender'), await online('plain-receiver')];

const isOtp = (stanza: Element) =>
  stanza.is('message') && stanza.getChild('svc', 'urn:svc:messaging:0')?.attrs.purpose === 'otp';
const latestCodes = new Map<string, string>();

type Group = typeof measuredGroup;

/** One code to each recipient; a call is over when its message is at the client. */
function otpRound({ users, sessions: recipientSessions }: Group): Promise<Run> {
  let next = 0;
  return timed(users.length, concurrency, async () => {
    const i = next++;
    const arriving = recipientSessions[i]!.next(isOtp);
    await injectOk(app, 'POST', '/v1/otp/send', headers, { to: users[i] });
    const body = (await arriving).getChildText('body') ?? '';
    latestCodes.set(users[i]!, /\b(\d{6})\b/.exec(body)![1]!);
  });
}

/** The same deliveries through the component alone: the server's part of a send. */
function componentRound({ sessions: recipientSessions }: Group, round: string): Promise<Run> {
  let next = 0;
  return timed(recipientSessions.length, concurrency, async () => {
    const i = next++;
    const session = recipientSessions[i]!;
    const id = `component-${round}-${i}`;
    const arriving = session.next((stanza) => stanza.is('message') && stanza.attrs.id === id);
    const status = await component.deliver({
      id,
      from: `${session.credential.user.split('.')[0]}.app`,
      to: session.credential.jid,
      body: `component ${id}`,
      marker: { purpose: 'bench' },
    });
    if (status !== 'online') throw new Error(`delivery ${id}: ${status}`);
    await arriving;
  });
}

/** As many plain messages from one client to another; each is over when it arrives. */
function plainRound({ users }: Group, round: string): Promise<Run> {
  let next = 0;
  return timed(users.length, concurrency, async () => {
    const id = `plain-${round}-${next++}`;
    const arriving = receiver.next((stanza) => stanza.is('message') && stanza.attrs.id === id);
    await sender.xmpp.send(
      xml('message', { to: receiver.credential.jid, type: 'chat', id }, xml('body', {}, `hello ${id}`)),
    );
    await arriving;
  });
}

const floorRound = ({ users }: Group) =>
  timed(users.length, concurrency, () => injectOk(app, 'POST', '/bench/floor/insert', {}));

const paths = (recipientsOf: Group, name: string) => ({
  otp: () => otpRound(recipientsOf),
  component: (round: number) => componentRound(recipientsOf, `${name}-${round}`),
  plain: (round: number) => plainRound(recipientsOf, `${name}-${round}`),
  floor: () => floorRound(recipientsOf),
});
await inTurns(paths(warmUpGroup, 'warm-up'), ROUNDS);
const taken = await inTurns(paths(measuredGroup, 'measured'), ROUNDS);
const line = (label: string, f: Figures, cpu: Cpu, count = recipients * ROUNDS) =>
  `${label.padEnd(44)} ${f.perSecond.toFixed(0).padStart(6)}/s  ${latencyLine(f)}\n${cpuLine(cpu, count, 2)}`;
const otp = figures(taken.otp.runs);
const plain = figures(taken.plain.runs);
const alone = figures(taken.component.runs);
const floor = figures(taken.floor.runs);
console.log(line('OTPs delivered (API call → client)', otp, taken.otp.cpu));
console.log(line('plain messages (client → client), the floor', plain, taken.plain.cpu));
console.log(line('deliveries through the component alone', alone, taken.component.cpu));
console.log(line('floor (a): one INSERT in one transaction', floor, taken.floor.cpu));
const ratio = (a: Figures, b: Figures) => (a.perSecond / b.perSecond).toFixed(2);
console.log(`ratio OTP / plain: ${ratio(otp, plain)} (>= 0.5 wanted)`);
console.log(`ratio component alone / plain: ${ratio(alone, plain)}; OTP / floor (a): ${ratio(otp, floor)}`);

/** Each recipient's latest code, verified once. */
const verifyAll = ({ users }: Group) => {
  let next = 0;
  return timed(users.length, concurrency, async () => {
    const user = users[next++]!;
    const response = await injectOk(app, 'POST', '/v1/otp/verify', headers, {
      to: user,
      code: latestCodes.get(user),
    });
    if (!response.json().verified) throw new Error(`the latest code of ${user} did not verify`);
  });
};
await verifyAll(warmUpGroup);
const verifyCpu = noCpu();
const verifications = await cpuMeter().charged(verifyCpu, () => verifyAll(measuredGroup));
console.log(line('verifications (POST /v1/otp/verify)', figures([verifications]), verifyCpu, recipients));

await component.stop();
await Promise.all(sessions.map((session) => session.stop()));
await app.close();
await container.close();
