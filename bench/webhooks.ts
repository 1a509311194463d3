/**
 * Webhook deliveries per second to a local receiver, beside a bare loop of the same HTTP POSTs from
 * Node: the ratio is what the worker's own steps cost (claiming, opening the sealed secret, signing,
 * recording each attempt), and the issue wants it ≥ 0.5.
 *
 * The path: each round emits `events` events to one endpoint (before the timer: emitting is not what
 * is measured), then times `webhookDelivery.deliverDue()` until every delivery was sent, answered
 * and recorded. The floor: the same number of POSTs of bodies of the same size, with the same
 * headers, to the same receiver, through a keep-alive node:http Agent, with as many in flight as the
 * worker lets one endpoint have (`perEndpoint`). The ratio that counts is against that floor; a
 * second floor with `maxInFlight` in flight is printed for scale only. Path and floor take turns in
 * every round (the order alternates), so that the drift of a shared machine hits both alike.
 *
 * The receiver answers 200 at once from a worker thread, so its cost does not fall on the sender's
 * thread (with `taskset -c 1` both threads share one core again, alike for path and floor).
 *
 * The container runs on a clock thirty years ahead (`clockYearsAhead`), a distance no test file takes:
 * its deliveries are never due for the test stack's running control plane (real time), whose worker
 * would otherwise send part of them, nor for a webhook test running meanwhile (ten or twenty years
 * ahead); and theirs are older than the events' retention for the bench's worker, which never sends
 * them. The bench still counts deliveries of other endpoints its worker took, and its own that
 * another worker took, and says so when there were any.
 *
 *   npm run stack -- up --profile test && npx tsx bench/webhooks.ts [events] [rounds]
 *   (and `taskset -c 1 npx tsx bench/webhooks.ts …` for one core)
 */
import { Agent, request as httpRequest } from 'node:http';
import { Worker } from 'node:worker_threads';
import { loadSettings } from '../control-plane/src/config/load.js';
import { type ContainerOptions, createContainer } from '../control-plane/src/container.js';
import { DEFAULT_DELIVERY_OPTIONS } from '../control-plane/src/modules/webhooks/delivery.js';
import { signatureHeaders, signingKeys } from '../control-plane/src/modules/webhooks/signatures.js';
import { newId } from '../control-plane/src/platform/ids.js';
import { inTransaction } from '../control-plane/src/platform/transaction.js';
import { clockYearsAhead, createCustomer } from '../control-plane/test/support.js';
import { cpuLine, cpuMeter, noCpu } from './cpu.js';
import { percentile, runConcurrently, useTestStackSettings } from './support.js';

useTestStackSettings();
const events = Number(process.argv[2] ?? 2_000);
const rounds = Number(process.argv[3] ?? 4);

/** What the receiver counts, shared with its thread: requests answered so far. */
const counters = new Int32Array(new SharedArrayBuffer(4));
const receiverThread = new Worker(
  `
  const { createServer } = require('node:http');
  const { parentPort, workerData } = require('node:worker_threads');
  const counters = new Int32Array(workerData);
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      // Counted before the answer leaves: a sender that has its answer finds the request counted.
      Atomics.add(counters, 0, 1);
      response.writeHead(200, { 'content-length': '0' });
      response.end();
    });
  });
  server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));
  parentPort.on('message', () => {
    server.closeAllConnections();
    server.close(() => parentPort.close());
  });`,
  { eval: true, workerData: counters.buffer },
);
const port = await new Promise<number>((resolve, reject) => {
  receiverThread.once('message', resolve);
  receiverThread.once('error', reject);
});
const received = () => Atomics.load(counters, 0);

/**
 * Watches the rows the worker's claims return: the bench's own deliveries this worker claimed, and
 * those of other endpoints it claimed.
 */
const watch = { endpointId: '', own: 0, foreign: 0 };
type Interceptor = NonNullable<ContainerOptions['interceptors']>[number];
const watcher: Interceptor = {
  name: 'bench-webhook-watch',
  transformRow: (_context, _query, row) => {
    if ('body' in row && 'failures' in row) {
      if (row.endpoint_id === watch.endpointId) watch.own += 1;
      else watch.foreign += 1;
    }
    return row;
  },
};

const clock = clockYearsAhead(30);
const container = await createContainer(loadSettings(process.env), { clock, interceptors: [watcher] });
const { app } = await createCustomer(container);
const scope = { appId: app.id, mode: 'test' as const };
const endpoint = await container.webhooks.create(scope, {
  url: `http://127.0.0.1:${port}/hook`,
  event_types: ['buzz.created'],
});
watch.endpointId = endpoint.id;

/** An event's data as a product would present a buzz: some 400 bytes of body in all. */
const data = (i: number) => ({
  id: `bz_${String(i).padStart(22, '0')}`,
  profile_id: 'ana@example.com',
  text: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore.',
  media: [],
  reactions: 0,
  comments: 0,
  created_at: clock.now().toISOString(),
});

/** Emits `count` events in one transaction: one pending delivery each. */
const emit = (count: number) =>
  inTransaction(container.pool, async (tx) => {
    for (let i = 0; i < count; i += 1) {
      await container.outbox.emit(tx, { ...scope, type: 'buzz.created', data: data(i) });
    }
  });

/** The floor's requests: the bytes the outbox would store, signed as an attempt would be. */
const floorRequests = Array.from({ length: events }, (_, i) => {
  const id = newId('evt');
  const body = JSON.stringify({
    id,
    type: 'buzz.created',
    created_at: clock.now().toISOString(),
    app_id: scope.appId,
    mode: scope.mode,
    data: data(i),
  });
  const headers = {
    'content-type': 'application/json',
    ...signatureHeaders(signingKeys(endpoint.secret), id, body, clock.now()),
    'User-Agent': 'svc-webhooks/1',
    'Content-Length': String(Buffer.byteLength(body)),
  };
  return { body, headers };
});

/** One bare POST through `agent`, its answer read to the end. */
const post = (agent: Agent, request: { body: string; headers: Record<string, string> }) =>
  new Promise<void>((resolve, reject) => {
    const sent = httpRequest(
      { host: '127.0.0.1', port, path: '/hook', method: 'POST', agent, headers: request.headers },
      (response) => {
        response.resume();
        response.on('end', () =>
          response.statusCode === 200 ? resolve() : reject(new Error(`status ${response.statusCode}`)),
        );
      },
    );
    sent.on('error', reject);
    sent.end(request.body);
  });

interface Run {
  elapsed: number;
  count: number;
  latencies: number[];
}

/** The floor with `concurrency` POSTs in flight, each through its own keep-alive agent's pool. */
function floorOf(concurrency: number) {
  const agent = new Agent({ keepAlive: true, timeout: 4_000 });
  return {
    agent,
    run: async (count: number): Promise<Run> => {
      let next = 0;
      const before = received();
      const started = performance.now();
      const latencies = await runConcurrently(count, concurrency, () =>
        post(agent, floorRequests[next++ % floorRequests.length]!),
      );
      const elapsed = performance.now() - started;
      // At least: another worker may send the bench's deliveries to this receiver meanwhile (see path).
      if (received() - before < count) throw new Error(`floor: ${received() - before} of ${count} arrived`);
      return { elapsed, count, latencies };
    },
  };
}

/**
 * Emits `count` events, then times the worker sending them all (deliverDue is timed as a whole, not
 * each delivery: no percentiles). Should another worker on this database take some, the rate is of
 * those this worker sent itself, and the others are counted.
 */
let takenByOthers = 0;
const { charged } = cpuMeter();
async function path(count: number, spent = noCpu()): Promise<Run> {
  await emit(count);
  const own = watch.own;
  const started = performance.now();
  await charged(spent, () => container.webhookDelivery.deliverDue());
  const elapsed = performance.now() - started;
  const sent = watch.own - own;
  if (sent > count) throw new Error(`path: ${sent} of ${count} deliveries claimed, some twice`);
  takenByOthers += count - sent;
  return { elapsed, count: sent, latencies: [] };
}

interface Figures {
  perSecond: number;
  p50: number;
  p99: number;
}

/** Deliveries or requests made in all of `runs`. */
const counted = (runs: Run[]) => runs.reduce((sum, run) => sum + run.count, 0);

function figures(runs: Run[]): Figures {
  const latencies = runs.flatMap((run) => run.latencies).sort((a, b) => a - b);
  const elapsed = runs.reduce((sum, run) => sum + run.elapsed, 0);
  return {
    perSecond: (counted(runs) / elapsed) * 1000,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  };
}

const line = (label: string, f: Figures) =>
  `  ${label.padEnd(58)} ${f.perSecond.toFixed(0).padStart(6)}/s` +
  (f.p50 >= 0 ? `  p50 ${f.p50.toFixed(2).padStart(6)} ms  p99 ${f.p99.toFixed(2).padStart(7)} ms` : '');

const { perEndpoint, maxInFlight } = DEFAULT_DELIVERY_OPTIONS;
const floor = floorOf(perEndpoint);
const wideFloor = floorOf(maxInFlight);

const runs = { path: [] as Run[], floor: [] as Run[], wide: [] as Run[] };
const cpu = { path: noCpu(), floor: noCpu() };
let drained = 0;
try {
  // Warm-up: JIT, first connections, and whatever else is due at this clock (leftovers of earlier runs).
  const warmUp = Math.min(200, events);
  await path(warmUp);
  await floor.run(warmUp);
  await wideFloor.run(warmUp);
  drained = watch.foreign;
  watch.foreign = 0;
  takenByOthers = 0;

  for (let round = 0; round < rounds; round += 1) {
    const turns = [
      async () => runs.path.push(await path(events, cpu.path)),
      async () => runs.floor.push(await charged(cpu.floor, () => floor.run(events))),
      async () => runs.wide.push(await wideFloor.run(events)),
    ];
    for (const turn of round % 2 === 0 ? turns : turns.reverse()) await turn();
  }
} finally {
  // Its deliveries go with it: none is left due for another worker on this clock.
  await container.webhooks.remove(scope, endpoint.id);
  floor.agent.destroy();
  wideFloor.agent.destroy();
  await container.close();
  receiverThread.postMessage('close');
}

const measured = { path: figures(runs.path), floor: figures(runs.floor), wide: figures(runs.wide) };
console.log(
  `webhook deliveries to one endpoint on loopback, ${events} a round, ${rounds} rounds in turns, node ${process.version}`,
);
console.log(line('worker: deliverDue() (claim, sign, POST, record)', measured.path));
console.log(cpuLine(cpu.path, counted(runs.path), 3));
console.log(line(`floor: bare keep-alive POSTs, ${perEndpoint} in flight (perEndpoint)`, measured.floor));
console.log(cpuLine(cpu.floor, counted(runs.floor), 3));
console.log(line(`floor: bare keep-alive POSTs, ${maxInFlight} in flight (maxInFlight)`, measured.wide));
if (drained > 0) console.log(`  the warm-up sent ${drained} leftover deliveries of other endpoints`);
if (watch.foreign + takenByOthers > 0) {
  console.log(
    `  NOT ALONE: while measuring, the worker sent ${watch.foreign} deliveries of other endpoints and another` +
      ` worker took ${takenByOthers} of the bench's (a webhook test running meanwhile?): figures disturbed`,
  );
}
console.log(
  `\nratio worker / floor with ${perEndpoint} in flight (the one that counts, ≥ 0.5 wanted): ${(measured.path.perSecond / measured.floor.perSecond).toFixed(2)}`,
);
console.log(
  `ratio worker / floor with ${maxInFlight} in flight (for scale only): ${(measured.path.perSecond / measured.wide.perSecond).toFixed(2)}`,
);
