/**
 * ejabberd_auth_svc_control_plane and svc_control_plane, the beams the stack runner built, in an Erlang
 * VM of their own, asked as ejabberd_auth asks them, against a stand-in control plane (or none at all).
 * A real login through them on the real ejabberd is every chat test's; what a control plane that fails
 * does to logins is tested here. `npm run stack -- up --profile test` builds the beams.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stackPaths } from '../../infra/src/paths.js';
import { freePort } from '../../infra/src/ports.js';

const EBIN = join(stackPaths('test').binDir, 'mod_svc_scope');
const SECRET = 'internal-secret-0123456789abcdefghijklmnopqrstuv';
const MODULE = 'ejabberd_auth_svc_control_plane';

/** What each test started: stopped after it, whatever the outcome. */
const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

interface Received {
  method: string | undefined;
  url: string | undefined;
  authorization: string | undefined;
  body: unknown;
}

type Handler = (body: Record<string, unknown>, response: ServerResponse) => void;

/** A stand-in for the control plane's internal listener; records what it was asked. */
async function startControlPlane(
  handler: Handler,
  port = 0,
): Promise<{ url: string; received: Received[]; inFlight: () => number }> {
  const received: Received[] = [];
  let open = 0;
  const server = createServer((request: IncomingMessage, response) => {
    const chunks: Buffer[] = [];
    open += 1;
    response.on('close', () => {
      open -= 1;
    });
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      received.push({
        method: request.method,
        url: request.url,
        authorization: request.headers.authorization,
        body,
      });
      handler(body, response);
    });
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    inFlight: () => open,
  };
}

const json = (response: ServerResponse, status: number, body: string) => {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(body);
};

/** Reads Erlang expressions from stdin, one a line, and prints each value as `=> <term>`. */
const EVAL_LOOP = `
  Loop = fun Loop() ->
    case io:get_line("") of
      eof -> halt(0);
      Line ->
        {ok, Tokens, _} = erl_scan:string(Line),
        {ok, Exprs} = erl_parse:parse_exprs(Tokens),
        {value, Value, _} = erl_eval:exprs(Exprs, []),
        io:format("=> ~0p~n", [Value]),
        Loop()
    end
  end,
  Loop().`;

interface Vm {
  /** The value of an Erlang expression (without its final dot), as Erlang prints it. */
  eval(expression: string): Promise<string>;
  /** Everything the VM printed, its log included. */
  output(): string;
  /** Waits until the VM has printed `text` (its log is written after the value it concerns). */
  printed(text: string): Promise<void>;
}

/** An Erlang VM with our beams, inets started, and, given a config file's text, the control plane set. */
async function startVm(config?: string): Promise<Vm> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-auth-'));
  const child: ChildProcessWithoutNullStreams = spawn('erl', ['-noshell', '-pa', EBIN, '-eval', EVAL_LOOP]);
  cleanups.push(() => {
    child.kill();
    rmSync(dir, { recursive: true, force: true });
  });
  let output = '';
  let answered = 0;
  const waiting: Array<() => void> = [];
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
    for (const wake of waiting.splice(0)) wake();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
    for (const wake of waiting.splice(0)) wake();
  });
  const printed = async <T>(found: () => T | undefined): Promise<T> => {
    for (;;) {
      const value = found();
      if (value !== undefined) return value;
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
  };
  const eval_ = (expression: string) => {
    const index = answered++;
    child.stdin.write(`${expression}.\n`);
    return printed(() => [...output.matchAll(/^=> (.*)$/gm)].map((match) => match[1]!)[index]);
  };
  expect(await eval_('element(1, application:ensure_all_started(inets))')).toBe('ok');
  if (config !== undefined) {
    const file = join(dir, 'control-plane.json');
    writeFileSync(file, config);
    expect(await eval_(`svc_control_plane:configure(<<"${file}">>)`)).toBe('ok');
  }
  expect(await eval_(`${MODULE}:start(<<"chat.local">>)`)).toBe('ok');
  return {
    eval: eval_,
    output: () => output,
    printed: (text) => printed(() => (output.includes(text) ? true : undefined)).then(() => {}),
  };
}

const configFor = (url: string) => JSON.stringify({ url, secret: SECRET });
const checkPassword = (user: string, password: string, authzId = '') =>
  `${MODULE}:check_password(<<"${user}">>, <<"${authzId}">>, <<"chat.local">>, <<"${password}">>)`;
const userExists = (user: string) => `${MODULE}:user_exists(<<"${user}">>, <<"chat.local">>)`;

describe('auth method svc_control_plane', () => {
  it('asks the control plane about passwords and accounts, with its secret, never caching', async () => {
    const controlPlane = await startControlPlane((body, response) =>
      json(response, 200, JSON.stringify({ ok: body.op === 'isuser' || body.password === 'p:w:d' })),
    );
    const vm = await startVm(configFor(`${controlPlane.url}/`));
    expect(await vm.eval(checkPassword('abc123defg.ana', 'p:w:d'))).toBe('{nocache,true}');
    expect(await vm.eval(checkPassword('abc123defg.bo', 'wrong'))).toBe('{nocache,false}');
    expect(await vm.eval(userExists('abc123defg.cy'))).toBe('{nocache,true}');
    expect(await vm.eval(`${MODULE}:use_cache(<<"chat.local">>)`)).toBe('false');
    expect(controlPlane.received.map((request) => request.body)).toEqual([
      { op: 'auth', user: 'abc123defg.ana', server: 'chat.local', password: 'p:w:d' },
      { op: 'auth', user: 'abc123defg.bo', server: 'chat.local', password: 'wrong' },
      { op: 'isuser', user: 'abc123defg.cy', server: 'chat.local' },
    ]);
    for (const request of controlPlane.received)
      expect(request).toMatchObject({
        method: 'POST',
        url: '/internal/ejabberd/auth',
        authorization: `Bearer ${SECRET}`,
      });
  });

  it('asks for each login from its own process, on a connection of its own: no login waits for another one’s answer', async () => {
    const LOGINS = 6;
    // The first question is answered at once and leaves a kept-alive connection idle. Then no answer
    // until every question is in flight at once: asked one after another, or queued behind another
    // on that connection (httpc's default), they would never all arrive.
    const held: ServerResponse[] = [];
    const controlPlane = await startControlPlane((_body, response) => {
      if (controlPlane.received.length === 1) return json(response, 200, '{"ok":true}');
      held.push(response);
      if (held.length === LOGINS) for (const each of held) json(each, 200, '{"ok":true}');
    });
    const vm = await startVm(configFor(controlPlane.url));
    expect(await vm.eval(checkPassword('abc123defg.ana', 'pw'))).toBe('{nocache,true}');
    const verdicts = await vm.eval(
      `Self = self(), ` +
        `[spawn(fun() -> Self ! {I, ${checkPassword('abc123defg.ana', 'pw')}} end) || I <- lists:seq(1, ${LOGINS})], ` +
        `[receive {I, Verdict} -> Verdict end || I <- lists:seq(1, ${LOGINS})]`,
    );
    expect(verdicts).toBe(`[${Array(LOGINS).fill('{nocache,true}').join(',')}]`);
    expect(controlPlane.received).toHaveLength(1 + LOGINS);
  });

  it('asks again on a new connection when the control plane closes a kept-alive one as a question goes out', async () => {
    // A restarted control plane: the connection kept from the first question is gone by the second.
    const served = new WeakSet<object>();
    const controlPlane = await startControlPlane((_body, response) => {
      if (served.has(response.socket!)) {
        response.socket!.destroy();
        return;
      }
      served.add(response.socket!);
      json(response, 200, '{"ok":true}');
    });
    const vm = await startVm(configFor(controlPlane.url));
    expect(await vm.eval(checkPassword('abc123defg.ana', 'pw'))).toBe('{nocache,true}');
    expect(await vm.eval(checkPassword('abc123defg.ana', 'pw'))).toBe('{nocache,true}');
    expect(controlPlane.received).toHaveLength(3);
  });

  it('refuses without asking a login for someone else, without a password, or whose password is not UTF-8', async () => {
    const controlPlane = await startControlPlane((_body, response) => json(response, 200, '{"ok":true}'));
    const vm = await startVm(configFor(controlPlane.url));
    expect(await vm.eval(checkPassword('abc123defg.ana', 'pw', 'abc123defg.bo'))).toBe('{nocache,false}');
    expect(await vm.eval(checkPassword('abc123defg.ana', ''))).toBe('{nocache,false}');
    // SASL PLAIN hands the client's bytes on unchecked; JSON cannot carry these.
    expect(
      await vm.eval(
        `${MODULE}:check_password(<<"abc123defg.ana">>, <<>>, <<"chat.local">>, <<255, 254, "pw">>)`,
      ),
    ).toBe('{nocache,false}');
    expect(controlPlane.received).toHaveLength(0);
    // UTF-8 is asked about as it is: "pwä".
    expect(
      await vm.eval(
        `${MODULE}:check_password(<<"abc123defg.ana">>, <<>>, <<"chat.local">>, <<"pw", 228/utf8>>)`,
      ),
    ).toBe('{nocache,true}');
    expect(controlPlane.received.map((request) => request.body)).toEqual([
      { op: 'auth', user: 'abc123defg.ana', server: 'chat.local', password: 'pw\u00e4' },
    ]);
  });

  it('counts anything but a 200 with a boolean "ok" as a refusal', async () => {
    const answers = [
      [500, '{"ok":true}'],
      [401, '{"ok":true}'],
      [200, 'not json'],
      [200, '{"ok":"yes"}'],
      [200, 'null'],
      [200, '[true]'],
    ] as const;
    let next = 0;
    const controlPlane = await startControlPlane((_body, response) => {
      const [status, body] = answers[next++ % answers.length]!;
      json(response, status, body);
    });
    const vm = await startVm(configFor(controlPlane.url));
    for (const _ of answers)
      expect(await vm.eval(checkPassword('abc123defg.ana', 'pw'))).toBe('{nocache,false}');
    // An account check that gets no answer is an error, not a "no": ejabberd then tries no other way.
    for (const _ of answers)
      expect(await vm.eval(userExists('abc123defg.ana'))).toBe('{nocache,{error,db_failure}}');
    expect(controlPlane.received).toHaveLength(2 * answers.length);
  });

  it('refuses at once while the control plane is unreachable, logging the outage and its end once', async () => {
    const port = await freePort();
    const vm = await startVm(configFor(`http://127.0.0.1:${port}`));
    for (let login = 0; login < 3; login++)
      expect(await vm.eval(checkPassword('abc123defg.ana', 'secret:with:colons'))).toBe('{nocache,false}');
    await startControlPlane((_body, response) => json(response, 200, '{"ok":true}'), port);
    for (let login = 0; login < 2; login++)
      expect(await vm.eval(checkPassword('abc123defg.ana', 'secret:with:colons'))).toBe('{nocache,true}');
    await vm.printed('answers login questions again');
    expect(vm.output().match(/refusing every login meanwhile/g)).toHaveLength(1);
    expect(vm.output()).toContain('econnrefused');
    expect(vm.output().match(/answers login questions again/g)).toHaveLength(1);
    expect(vm.output()).not.toContain('colons');
  });

  it('refuses after 5 s without an answer', async () => {
    const controlPlane = await startControlPlane(() => {});
    const vm = await startVm(configFor(controlPlane.url));
    const started = Date.now();
    expect(await vm.eval(checkPassword('abc123defg.ana', 'pw'))).toBe('{nocache,false}');
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_900);
    await vm.printed('timeout');
  }, 15_000);

  it('refuses every login when mod_svc_scope named no control plane', async () => {
    const vm = await startVm();
    expect(await vm.eval(checkPassword('abc123defg.ana', 'pw'))).toBe('{nocache,false}');
    await vm.printed('not_configured');
  });
});
