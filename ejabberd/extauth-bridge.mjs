// ejabberd's external-auth program (extauth_program in ejabberd.yml): answers every login question
// by asking the control plane. Plain Node without dependencies, for Node 18 too (the ejabberd image
// has Debian's nodejs).
//
//   node extauth-bridge.mjs <config.json>     config: {"url": "http://127.0.0.1:8080", "secret": "..."}
//
// auth and isuser become POST <url>/internal/ejabberd/auth with the internal secret as bearer token;
// every other op (setpass, tryregister, removeuser, ...) is refused without asking. Anything but a
// 200 {"ok": true|false} in time counts as a refusal: no login passes unless the control plane says
// yes, and logins work again as soon as it answers. stdout carries replies only; diagnostics go to
// stderr (ejabberd's log), never a password.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { ASKED_OPS, createFrameReader, encodeReply, parseRequest } from './extauth-protocol.mjs';

/** Far below ejabberd's 30 s per call: a hung control plane costs one login, never a pool worker. */
const TIMEOUT_MS = 5_000;

/** @param {string} message */
function log(message) {
  process.stderr.write(`extauth-bridge: ${message}\n`);
}

/** @param {string} message @returns {never} */
function fail(message) {
  log(message);
  process.exit(1);
}

/** @param {string | undefined} path */
function loadConfig(path) {
  if (!path) fail('usage: extauth-bridge.mjs <config.json>');
  let text;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    fail(`cannot read ${path} (${/** @type {NodeJS.ErrnoException} */ (error).code})`);
  }
  let config;
  try {
    config = JSON.parse(text);
  } catch {
    // Not the parser's message: it quotes the file, which holds the secret.
    fail(`${path} is not valid JSON`);
  }
  const { url, secret } = config ?? {};
  if (typeof url !== 'string' || !/^https?:\/\/./.test(url)) fail(`${path}: "url" must be an http(s) URL`);
  if (typeof secret !== 'string' || secret === '') fail(`${path}: "secret" must be a non-empty string`);
  return { endpoint: new URL(`${url.replace(/\/+$/, '')}/internal/ejabberd/auth`), secret };
}

const { endpoint, secret } = loadConfig(process.argv[2]);
const transport = endpoint.protocol === 'https:' ? https : http;
// One kept-alive connection per question in flight, and no cap: ejabberd asks each bridge process
// one question at a time (its pool gives concurrency, extauth_pool_size), so a process keeps one
// socket open to the control plane and never pays a TCP handshake per login; questions that do
// overlap never wait inside the bridge for a free socket.
const agent = new transport.Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

/**
 * One POST within the deadline; resolves with the status and body. A kept-alive socket that the
 * server closed while idle fails at once with ECONNRESET: that request is retried once on a new
 * socket, as Node's documentation advises (request.reusedSocket).
 * @param {string} body
 * @param {AbortSignal} signal
 * @param {boolean} retry
 * @returns {Promise<{ status: number | undefined, text: string }>}
 */
function post(body, signal, retry = true) {
  return new Promise((resolve, reject) => {
    const request = transport.request(
      endpoint,
      {
        method: 'POST',
        agent,
        signal,
        headers: {
          authorization: `Bearer ${secret}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (response) => {
        /** @type {Buffer[]} */
        const chunks = [];
        response.on('data', (chunk) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode, text: Buffer.concat(chunks).toString('utf8') }),
        );
        response.on('error', reject);
        response.on('close', () => {
          if (!response.complete) reject(new Error('response cut short'));
        });
      },
    );
    request.on('error', (error) => {
      const stale =
        request.reusedSocket && /** @type {NodeJS.ErrnoException} */ (error).code === 'ECONNRESET';
      if (retry && stale) resolve(post(body, signal, false));
      else reject(error);
    });
    request.end(body);
  });
}

/** The control plane's yes or no; throws when it gave neither. @param {Record<string, string>} question */
async function ask(question) {
  // A plain timer: AbortSignal.timeout() costs a weakly-held timer per question.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), TIMEOUT_MS);
  const signal = deadline.signal;
  try {
    const { status, text } = await post(JSON.stringify(question), signal);
    if (status !== 200) throw new Error(`HTTP ${status}`);
    const ok = JSON.parse(text)?.ok;
    if (typeof ok !== 'boolean') throw new Error('a 200 without a boolean "ok"');
    return ok;
  } catch (error) {
    if (signal.aborted) throw new Error(`no answer within ${TIMEOUT_MS / 1000} s`);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The last failure logged: an outage is logged when it starts and when it ends, not per login.
 * @type {string | undefined}
 */
let outage;
/** @param {string | undefined} problem */
function noteOutage(problem) {
  if (problem === outage) return;
  log(
    problem === undefined ? 'the control plane answers again' : `${problem}; refusing every login meanwhile`,
  );
  outage = problem;
}

/** @param {string} frame @returns {Promise<boolean>} */
async function answer(frame) {
  const { op, user, server, password } = parseRequest(frame);
  if (!ASKED_OPS.has(op) || !user || !server) return false;
  try {
    const ok = await ask(
      op === 'auth' ? { op, user, server, password: password ?? '' } : { op, user, server },
    );
    noteOutage(undefined);
    return ok;
  } catch (error) {
    const { code, message } = /** @type {NodeJS.ErrnoException} */ (error);
    noteOutage(`the control plane at ${endpoint.origin} gave no usable answer (${code ?? message})`);
    return false;
  }
}

// Each request is answered as soon as its frame is complete; replies leave in request order.
const readFrames = createFrameReader();
let replies = Promise.resolve();
process.stdin.on('data', (chunk) => {
  for (const frame of readFrames(chunk)) {
    const verdict = answer(frame);
    replies = replies.then(async () => {
      process.stdout.write(encodeReply(await verdict));
    });
  }
});
// ejabberd closes the port when it stops or restarts this worker: nobody is left to answer.
process.stdin.on('end', () => process.exit(0));
process.stdout.on('error', () => process.exit(0));
