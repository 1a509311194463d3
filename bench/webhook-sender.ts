/**
 * What the webhook sender (control-plane/src/adapters/webhook-sender.ts) adds to one POST: its
 * attempts beside bare node:http requests with the same headers and body, through a keep-alive agent
 * of the same options, to a receiver in a process of its own (so that only the sender's side is
 * charged), with `concurrency` in flight. The two take turns for `rounds` rounds; the least CPU a call
 * took in any round is printed for each, and the difference: what the sender's own steps cost (its
 * target, its timer, the capped reading of the answer), apart from the machine's drift.
 *
 *   taskset -c 1 npx tsx bench/webhook-sender.ts [calls] [concurrency] [rounds]
 */
import { spawn } from 'node:child_process';
import { Agent, request as httpRequest } from 'node:http';
import { createWebhookSender } from '../control-plane/src/adapters/webhook-sender.js';
import { signatureHeaders, signingKeys } from '../control-plane/src/modules/webhooks/signatures.js';
import { runConcurrently } from './support.js';

const calls = Number(process.argv[2] ?? 10_000);
const concurrency = Number(process.argv[3] ?? 8);
const rounds = Number(process.argv[4] ?? 6);

const receiver = spawn(
  process.execPath,
  [
    '-e',
    `const server = require('node:http').createServer((request, response) => {
       request.resume();
       request.on('end', () => { response.writeHead(200, { 'content-length': '0' }); response.end(); });
     });
     server.listen(0, '127.0.0.1', () => process.send(server.address().port));
     process.on('disconnect', () => process.exit(0));`,
  ],
  { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] },
);
const port = await new Promise<number>((resolve, reject) => {
  receiver.once('message', (message) => resolve(Number(message)));
  receiver.once('error', reject);
});

const userAgent = 'svc-webhooks/1';
const sender = createWebhookSender({
  timeoutMs: 5_000,
  excerptBytes: 1_024,
  allowedNetworks: ['127.0.0.0/8'],
  userAgent,
});
const agent = new Agent({ keepAlive: true, timeout: 4_000 });
const body = JSON.stringify({ id: 'evt_bench', type: 'ping', data: { text: 'x'.repeat(300) } });
const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const headers = signatureHeaders(signingKeys(secret), 'evt_bench', body, new Date());
const bareHeaders = {
  ...headers,
  'content-type': 'application/json',
  'User-Agent': userAgent,
  'Content-Length': String(Buffer.byteLength(body)),
};

const bare = () =>
  new Promise<void>((resolve, reject) => {
    const sent = httpRequest(
      { host: '127.0.0.1', port, path: '/hook', method: 'POST', agent, headers: bareHeaders },
      (response) => {
        response.resume();
        response.on('end', resolve);
      },
    );
    sent.on('error', reject);
    sent.end(body);
  });
const url = `http://127.0.0.1:${port}/hook`;
const attempt = async () => {
  const outcome = await sender.send({ url, headers, body });
  if (outcome.kind !== 'response' || outcome.status !== 200) throw new Error(JSON.stringify(outcome));
};

const least = { bare: Number.POSITIVE_INFINITY, sender: Number.POSITIVE_INFINITY };
try {
  for (let round = 0; round < rounds; round += 1) {
    const turns = [
      ['bare', bare],
      ['sender', attempt],
    ] as const;
    for (const [name, call] of round % 2 === 0 ? turns : [...turns].reverse()) {
      const before = process.cpuUsage();
      await runConcurrently(calls, concurrency, call);
      const spent = process.cpuUsage(before);
      least[name] = Math.min(least[name], (spent.user + spent.system) / calls);
    }
  }
} finally {
  sender.close();
  agent.destroy();
  receiver.disconnect();
}
console.log(
  `webhook POSTs to a receiver in another process, ${calls} a round, ${concurrency} in flight, ${rounds} rounds in turns`,
);
console.log(
  `  bare node:http requests      ${least.bare.toFixed(1).padStart(6)} µs of CPU a call (least of the rounds)`,
);
console.log(`  the webhook sender's attempts ${least.sender.toFixed(1).padStart(5)} µs`);
console.log(
  `  the sender's own steps        ${(least.sender - least.bare).toFixed(1).padStart(5)} µs a call (${(least.bare / least.sender).toFixed(2)}× the bare rate)`,
);
