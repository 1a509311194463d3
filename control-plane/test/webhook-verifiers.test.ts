/**
 * The README's webhook verifiers (Node, Python, Go; kept in docs/webhook-verifiers/ and shown in the
 * README word for word) against real deliveries: each accepts them and refuses a wrong secret, a
 * body changed by one byte, a stale timestamp, a replay under a fresh timestamp, and the previous
 * secret after a rotation.
 *
 * The app runs on a clock twenty years ahead (`clockYearsAhead`): the test stack's running control
 * plane, on real time, sees these deliveries as not yet due and never takes them, and the other
 * webhook test files take distances of their own (webhooks.test.ts ten years), so only this file's
 * worker sends them.
 */
import { execFileSync } from 'node:child_process';
import {
  accessSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventInput } from '../src/platform/outbox.js';
import { inTransaction } from '../src/platform/transaction.js';
import { callWithKey, clockYearsAhead, createCustomer, startTestApp, type TestContext } from './support.js';
import { type ReceivedRequest, type Receiver, startReceiver } from './webhook-receiver.js';

const verifiers = new URL('../../docs/webhook-verifiers/', import.meta.url);
const source = (file: string) => readFileSync(new URL(file, verifiers), 'utf8');
const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** What a verifier is given: a captured delivery, the secret it is checked with, and its `now`. */
interface Case {
  name: string;
  body: string;
  headers: Record<string, string>;
  secret: string;
  /** Seconds since the epoch. */
  now: number;
}

/** What a verifier answered: the event's id and type, or its refusal's message. */
type Outcome = { event: { id: string; type: string } } | { error: string };

let ctx: TestContext;
let receiver: Receiver;
let cases: Case[];
let expected: Outcome[];

const stringHeaders = (request: ReceivedRequest) =>
  Object.fromEntries(
    Object.entries(request.headers).filter(
      (entry): entry is [string, string] => typeof entry[1] === 'string',
    ),
  );
const timestampOf = (request: ReceivedRequest) => Number(request.headers['webhook-timestamp']);

beforeAll(async () => {
  ctx = await startTestApp({ clock: clockYearsAhead(20) });
  receiver = await startReceiver();
  const customer = await createCustomer(ctx.container);
  const call = (url: string, payload?: object) => callWithKey(ctx.app, customer.token, 'POST', url, payload);
  const created = await call('/v1/webhooks', { url: receiver.url, event_types: ['buzz.created'] });
  expect(created.statusCode, created.body).toBe(201);
  const endpoint = created.json<{ id: string; secret: string }>();

  const deliver = async (data: EventInput['data'], count: number) => {
    await inTransaction(ctx.container.pool, (tx) =>
      ctx.container.outbox.emit(tx, { appId: customer.app.id, mode: 'test', type: 'buzz.created', data }),
    );
    await ctx.container.webhookDelivery.deliverDue();
    return (await receiver.waitFor(count))[count - 1]!;
  };
  const first = await deliver({ id: 'bz_1', text: 'hello' }, 1);
  const rotated = await call(`/v1/webhooks/${endpoint.id}/rotate`);
  expect(rotated.statusCode, rotated.body).toBe(200);
  const newSecret = rotated.json<{ secret: string }>().secret;
  const second = await deliver({ id: 'bz_2', text: 'after the rotation' }, 2);

  const now = timestampOf(first);
  const headers = stringHeaders(first);
  const changed = first.body.replace('"hello"', '"hellO"');
  expect(changed).not.toBe(first.body);
  const wrongSecret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
  const signatures = `v1,${Buffer.alloc(32).toString('base64')} ${headers['webhook-signature']}`;
  const refused = (error: string): Outcome => ({ error });
  const table: [Case, Outcome][] = [
    [
      { name: 'the delivery', body: first.body, headers, secret: endpoint.secret, now },
      { event: { id: first.eventId, type: 'buzz.created' } },
    ],
    [
      { name: 'a wrong secret', body: first.body, headers, secret: wrongSecret, now },
      refused('bad X-Svc-Signature'),
    ],
    [
      { name: 'the body changed by one byte', body: changed, headers, secret: endpoint.secret, now },
      refused('bad X-Svc-Signature'),
    ],
    [
      {
        name: 'a timestamp 6 minutes before now',
        body: first.body,
        headers,
        secret: endpoint.secret,
        now: now + 6 * 60,
      },
      refused('webhook-timestamp too old or too new'),
    ],
    [
      {
        name: 'a timestamp 6 minutes after now',
        body: first.body,
        headers,
        secret: endpoint.secret,
        now: now - 6 * 60,
      },
      refused('webhook-timestamp too old or too new'),
    ],
    [
      // X-Svc-Signature alone would take this replay: it signs the body only.
      {
        name: 'a replay under a fresh timestamp',
        body: first.body,
        headers: { ...headers, 'webhook-timestamp': String(now + 6 * 60) },
        secret: endpoint.secret,
        now: now + 6 * 60,
      },
      refused('bad webhook-signature'),
    ],
    [
      {
        name: 'several signatures, one of them right',
        body: first.body,
        headers: { ...headers, 'webhook-signature': signatures },
        secret: endpoint.secret,
        now,
      },
      { event: { id: first.eventId, type: 'buzz.created' } },
    ],
    [
      {
        name: 'the previous secret after a rotation',
        body: second.body,
        headers: stringHeaders(second),
        secret: endpoint.secret,
        now: timestampOf(second),
      },
      refused('bad X-Svc-Signature'),
    ],
    [
      {
        name: 'the new secret after a rotation',
        body: second.body,
        headers: stringHeaders(second),
        secret: newSecret,
        now: timestampOf(second),
      },
      { event: { id: second.eventId, type: 'buzz.created' } },
    ],
  ];
  cases = table.map(([input]) => input);
  expected = table.map(([, outcome]) => outcome);
});

afterAll(async () => {
  await receiver?.close();
  await ctx?.close();
});

/** Runs a verifier's harness on every case (a JSON file it reads) and answers its outcomes. */
function runHarness(run: (casesFile: string) => string): Outcome[] {
  const dir = mkdtempSync(join(tmpdir(), 'svc-webhook-verifiers-'));
  try {
    const file = join(dir, 'cases.json');
    writeFileSync(file, JSON.stringify(cases));
    return JSON.parse(run(file)) as Outcome[];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const named = (outcomes: Outcome[]) => outcomes.map((outcome, index) => [cases[index]!.name, outcome]);

/**
 * With a warm build cache (the stack's own Go builds share it) `go run` takes about a second;
 * compiling the runtime and the standard packages into an empty one takes 15-40 s.
 */
const GO_TIMEOUT_MS = 120_000;

/** Go from PATH, else where its installer puts it. */
const go = (process.env.PATH ?? '').split(':').some((dir) => dir && existsSync(join(dir, 'go')))
  ? 'go'
  : '/usr/local/go/bin/go';

/**
 * Go's environment: its default build cache when it can write there (warm from the stack's own Go
 * builds), else one in the temporary directory; never a toolchain download.
 */
function goEnvironment(): NodeJS.ProcessEnv {
  const env = { ...process.env, GOTOOLCHAIN: 'local' };
  try {
    // "off" when Go finds no home for it.
    const cache = execFileSync(go, ['env', 'GOCACHE'], { env, encoding: 'utf8' }).trim();
    if (!isAbsolute(cache)) throw new Error(`no usable GOCACHE: ${cache}`);
    mkdirSync(cache, { recursive: true });
    accessSync(cache, constants.W_OK);
    return env;
  } catch {
    return { ...env, GOCACHE: join(tmpdir(), 'svc-webhook-verifiers-go-cache') };
  }
}

describe("the README's webhook verifiers", () => {
  it('are in the README word for word', () => {
    for (const file of ['verify.mjs', 'verify.py', 'verify.go']) {
      expect(README.includes(source(file).trim()), `README shows docs/webhook-verifiers/${file}`).toBe(true);
    }
  });

  it('Node: accepts a real delivery and refuses each wrong thing', async () => {
    type Verify = (body: string, headers: Record<string, string>, secret: string, now?: number) => unknown;
    const { verifyWebhook } = (await import(new URL('verify.mjs', verifiers).href)) as {
      verifyWebhook: Verify;
    };
    const outcomes = cases.map((input): Outcome => {
      try {
        const event = verifyWebhook(input.body, input.headers, input.secret, input.now) as Record<
          string,
          string
        >;
        return { event: { id: event.id!, type: event.type! } };
      } catch (error) {
        return { error: (error as Error).message };
      }
    });
    expect(named(outcomes)).toEqual(named(expected));
    // Its `now` defaults to the current time, twenty years before this delivery's.
    const [delivery] = cases;
    expect(() => verifyWebhook(delivery!.body, delivery!.headers, delivery!.secret)).toThrow(
      'webhook-timestamp too old or too new',
    );
    // The whole event, as the body carries it.
    expect(verifyWebhook(delivery!.body, delivery!.headers, delivery!.secret, delivery!.now)).toEqual(
      JSON.parse(delivery!.body),
    );
  });

  it('Python: accepts a real delivery and refuses each wrong thing', () => {
    const harness = `
import sys
results = []
for case in json.load(open(sys.argv[1])):
    try:
        event = verify_webhook(case['body'].encode(), case['headers'], case['secret'], case['now'])
        results.append({'event': {'id': event['id'], 'type': event['type']}})
    except ValueError as error:
        results.append({'error': str(error)})
print(json.dumps(results))`;
    const outcomes = runHarness((file) =>
      execFileSync('python3', ['-c', `${source('verify.py')}\n${harness}`, file], { encoding: 'utf8' }),
    );
    expect(named(outcomes)).toEqual(named(expected));
  });

  it(
    'Go: accepts a real delivery and refuses each wrong thing',
    () => {
      const harness = `package main

import (
	"encoding/json"
	"os"
	"strings"
	"time"
)

type header map[string]string

func (h header) Get(name string) string { return h[strings.ToLower(name)] }

func main() {
	input, err := os.ReadFile(os.Args[1])
	if err != nil {
		panic(err)
	}
	var cases []struct {
		Body    string \`json:"body"\`
		Headers header \`json:"headers"\`
		Secret  string \`json:"secret"\`
		Now     int64  \`json:"now"\`
	}
	if err := json.Unmarshal(input, &cases); err != nil {
		panic(err)
	}
	results := []any{}
	for _, c := range cases {
		event, err := Verify([]byte(c.Body), c.Headers, c.Secret, time.Unix(c.Now, 0))
		if err != nil {
			results = append(results, map[string]string{"error": err.Error()})
		} else {
			results = append(results, map[string]any{"event": map[string]string{"id": event.ID, "type": event.Type}})
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		panic(err)
	}
}
`;
      const outcomes = runHarness((file) => {
        const dir = join(file, '..');
        writeFileSync(join(dir, 'main.go'), harness);
        writeFileSync(join(dir, 'verify.go'), source('verify.go').replace(/^package \w+/m, 'package main'));
        return execFileSync(go, ['run', 'main.go', 'verify.go', file], {
          cwd: dir,
          encoding: 'utf8',
          env: goEnvironment(),
          timeout: GO_TIMEOUT_MS - 10_000,
        });
      });
      expect(named(outcomes)).toEqual(named(expected));
    },
    GO_TIMEOUT_MS,
  );
});
