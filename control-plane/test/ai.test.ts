import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AI_LIMITS } from '../src/modules/ai/schema.js';
import { callWithKey, createCustomer, freePort, startTestApp, type TestContext } from './support.js';

// The AI endpoints against the test stack's real local provider (ai/serve.py: llama.cpp with
// SmolLM2-135M, and a moderation classifier). The model is tiny and invents facts: these tests assert
// shapes, limits, money and determinism, never wording.

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

const errorOf = (response: { statusCode: number; json(): { error: { code?: string; type: string } } }) => [
  response.statusCode,
  response.json().error.code ?? response.json().error.type,
];

async function customer(context: TestContext, options: Parameters<typeof createCustomer>[1] = {}) {
  const made = await createCustomer(context.container, options);
  return (url: string, body: object) => callWithKey(context.app, made.token, 'POST', url, body);
}

describe('generate', () => {
  it('writes text within max_tokens, the same twice at temperature 0, priced per call', async () => {
    const call = await customer(ctx);
    const body = { prompt: 'Name three colours.', system: 'Answer briefly.', max_tokens: 12 };
    const first = await call('/v1/ai/generate', body);
    expect(first.statusCode, first.body).toBe(200);
    const answer = first.json();
    expect(answer).toEqual({ text: expect.any(String), model: 'smollm2-135m', cost_milli: 2 });
    expect(answer.text.length).toBeGreaterThan(0);
    expect(first.headers['x-svc-cost-usd']).toBe('0.002000');
    expect((await call('/v1/ai/generate', body)).json().text).toBe(answer.text);
  });

  it('refuses every input past its limits with the error body', async () => {
    const call = await customer(ctx);
    const cases: [object, string][] = [
      [{ prompt: '' }, 'prompt'],
      [{ prompt: '   ' }, 'prompt'],
      [{ prompt: 'x'.repeat(AI_LIMITS.promptChars + 1) }, 'prompt'],
      [{ prompt: 'hi', max_tokens: AI_LIMITS.maxTokens + 1 }, 'max_tokens'],
      [{ prompt: 'hi', max_tokens: 0 }, 'max_tokens'],
      [{ prompt: 'hi', system: '' }, 'system'],
      [{ prompt: 'hi', temperature: 3 }, 'temperature'],
      [{ prompt: 'hi', model: 'gpt-4' }, 'model'],
      [{}, 'prompt'],
    ];
    for (const [body, field] of cases) {
      const refused = await call('/v1/ai/generate', body);
      expect(refused.statusCode, JSON.stringify(body)).toBe(422);
      expect(refused.json().error.fields.map((f: { field: string }) => f.field)).toContain(field);
    }
    // At the character limit the request passes our checks, and the model's context (2,048 tokens)
    // is what refuses it: a 422 too, naming max_tokens with the provider's reason.
    const longest = await call('/v1/ai/generate', {
      prompt: 'x '.repeat(AI_LIMITS.promptChars / 2),
      max_tokens: 1,
    });
    expect(longest.statusCode, longest.body).toBe(422);
    expect(longest.json().error.fields[0].field).toBe('max_tokens');
  });
});

describe('chat', () => {
  it('answers a multi-turn conversation as the assistant, with its cost', async () => {
    const call = await customer(ctx);
    const reply = await call('/v1/ai/chat', {
      system: 'You are a helpful assistant.',
      messages: [
        { role: 'user', content: 'My name is Ana.' },
        { role: 'assistant', content: 'Hello Ana!' },
        { role: 'user', content: 'What is my name?' },
      ],
      max_tokens: 16,
    });
    expect(reply.statusCode, reply.body).toBe(200);
    expect(reply.json()).toEqual({
      reply: expect.any(String),
      role: 'assistant',
      model: 'smollm2-135m',
      cost_usd: 0.003,
    });
    expect(reply.headers['x-svc-cost-usd']).toBe('0.003000');
  });

  it('refuses a bad role, no messages, and too many', async () => {
    const call = await customer(ctx);
    const message = { role: 'user', content: 'hi' };
    for (const [body, field] of [
      [{ messages: [{ role: 'robot', content: 'hi' }] }, 'messages.0.role'],
      [{ messages: [] }, 'messages'],
      [{ messages: Array(AI_LIMITS.messages + 1).fill(message) }, 'messages'],
      [{ messages: [{ role: 'user', content: '' }] }, 'messages.0.content'],
      [{ messages: [message], max_tokens: 2001 }, 'max_tokens'],
    ] as [object, string][]) {
      const refused = await call('/v1/ai/chat', body);
      expect(refused.statusCode, JSON.stringify(body).slice(0, 80)).toBe(422);
      expect(refused.json().error.fields.map((f: { field: string }) => f.field)).toContain(field);
    }
  });
});

describe('moderate', () => {
  it('flags an insult and not a greeting', async () => {
    const call = await customer(ctx);
    const insult = await call('/v1/ai/moderate', { text: 'you are a stupid idiot' });
    expect(insult.statusCode, insult.body).toBe(200);
    expect(insult.json()).toEqual({ flagged: true, categories: ['harassment'], model: 'profanity-check' });
    const greeting = await call('/v1/ai/moderate', { text: 'Hello, how are you today?' });
    expect(greeting.json()).toEqual({ flagged: false, categories: [], model: 'profanity-check' });
    expect(greeting.headers['x-svc-cost-usd']).toBe('0.000500');
    expect((await call('/v1/ai/moderate', { text: '' })).statusCode).toBe(422);
  });
});

describe('plans and money', () => {
  it('refuses the Free plan, and a live key with an empty balance, before any inference', async () => {
    const free = await customer(ctx, { plan: 'free' });
    for (const url of ['/v1/ai/generate', '/v1/ai/chat', '/v1/ai/moderate'])
      expect(errorOf(await free(url, { prompt: 'hi', messages: [], text: 'hi' }))).toEqual([
        402,
        'PAYMENT_REQUIRED',
      ]);
    const broke = await customer(ctx, { mode: 'live' });
    expect(errorOf(await broke('/v1/ai/generate', { prompt: 'hi' }))).toEqual([402, 'PAYMENT_REQUIRED']);
  });

  it('charges a live balance the call’s price, and a test key nothing', async () => {
    const made = await createCustomer(ctx.container, { mode: 'live', balanceMicros: 1_000_000 });
    const generated = await callWithKey(ctx.app, made.token, 'POST', '/v1/ai/generate', {
      prompt: 'Hi',
      max_tokens: 4,
    });
    expect(generated.statusCode, generated.body).toBe(200);
    const balance = await callWithKey(ctx.app, made.token, 'GET', '/v1/realtime/balance');
    expect(balance.json().balance_micros).toBe(1_000_000 - 2_000);
  });
});

describe('when the provider cannot answer', () => {
  it('answers 503 when none is configured, or when it is down or silent too long, and charges nothing', async () => {
    const unconfigured = await startTestApp({ settings: { SVC_AI_BASE_URL: '' } });
    const down = await startTestApp({
      settings: { SVC_AI_BASE_URL: `http://127.0.0.1:${await freePort()}/v1`, SVC_AI_MODERATION_URL: '' },
    });
    const impatient = await startTestApp({ settings: { SVC_AI_TIMEOUT_MS: 1_000 } });
    try {
      expect(errorOf(await (await customer(unconfigured))('/v1/ai/generate', { prompt: 'hi' }))).toEqual([
        503,
        'AI_UNCONFIGURED',
      ]);
      const made = await createCustomer(down.container, { mode: 'live', balanceMicros: 1_000_000 });
      const refused = await callWithKey(down.app, made.token, 'POST', '/v1/ai/chat', {
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(errorOf(refused)).toEqual([503, 'service_unavailable']);
      expect(refused.headers['x-svc-cost-usd']).toBe('0.000000');
      const balance = await callWithKey(down.app, made.token, 'GET', '/v1/realtime/balance');
      expect(balance.json().balance_micros).toBe(1_000_000);
      // A long prompt keeps the provider reading it, silent, for longer than the timeout (about 8 s
      // here; new, so that no slot has it cached); the same call is answered where the provider may
      // take the default time to start.
      const longPrompt = {
        prompt: `${randomUUID()} ${'Tell me about the sea and the ships on it. '.repeat(60)}`,
        max_tokens: 20,
      };
      expect(errorOf(await (await customer(impatient))('/v1/ai/generate', longPrompt))).toEqual([
        503,
        'service_unavailable',
      ]);
      expect((await (await customer(ctx))('/v1/ai/generate', longPrompt)).statusCode).toBe(200);
    } finally {
      await Promise.all([unconfigured.close(), down.close(), impatient.close()]);
    }
  });

  it('waits out a long answer that keeps coming, however long it takes in all', async () => {
    const patient = await startTestApp({ settings: { SVC_AI_TIMEOUT_MS: 2_000 } });
    try {
      const started = performance.now();
      // 400 tokens at temperature 0 (the same every time): about 7 s here, a token every 20 ms or so.
      const long = await (await customer(patient))('/v1/ai/generate', {
        prompt: 'Write a long story about a dragon.',
        max_tokens: 400,
      });
      expect(long.statusCode, long.body).toBe(200);
      // Longer than the timeout, which bounds only the provider's silences.
      expect(performance.now() - started).toBeGreaterThan(2_000);
      expect(long.json().text.length).toBeGreaterThan(0);
    } finally {
      await patient.close();
    }
  });
});

describe('fair use', () => {
  it('answers 429 with a retry hint past the queue, and past an app’s share', async () => {
    const small = await startTestApp({
      settings: { SVC_AI_CONCURRENCY: 1, SVC_AI_QUEUE: 0, SVC_AI_PER_APP: 1 },
    });
    try {
      const [one, other] = [await customer(small), await customer(small)];
      const long = { prompt: 'Count from one to one hundred in words.', max_tokens: 300 };
      const running = one('/v1/ai/generate', long);
      // Past the app's share (one call), then past the line (none waiting), for another app.
      await new Promise((resolve) => setTimeout(resolve, 100));
      const again = await one('/v1/ai/generate', long);
      expect(again.statusCode).toBe(429);
      expect(Number(again.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      const busy = await other('/v1/ai/moderate', { text: 'hello' });
      expect(busy.statusCode).toBe(429);
      expect((await running).statusCode).toBe(200);
      expect((await other('/v1/ai/moderate', { text: 'hello' })).statusCode).toBe(200);
    } finally {
      await small.close();
    }
  });

  it('frees the place of a client that went away, and stops its generation', async () => {
    const small = await startTestApp({
      settings: { SVC_AI_CONCURRENCY: 1, SVC_AI_QUEUE: 0, SVC_AI_PER_APP: 1 },
    });
    try {
      const made = await createCustomer(small.container);
      const address = await small.app.listen({ host: '127.0.0.1', port: 0 });
      const leaving = new AbortController();
      const gone = fetch(`${address}/v1/ai/generate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${made.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'Write a long story about a dragon.', max_tokens: 2_000 }),
        signal: leaving.signal,
      }).catch((error: Error) => error.name);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(small.container.ai.load().running).toBe(1);
      leaving.abort();
      expect(await gone).toBe('AbortError');
      // Its place is free at once: the next call of the same app is let in, not refused (429).
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(small.container.ai.load()).toEqual({ running: 0, waiting: 0 });
      const next = await callWithKey(small.app, made.token, 'POST', '/v1/ai/moderate', { text: 'hello' });
      expect(next.statusCode, next.body).toBe(200);
    } finally {
      await small.close();
    }
  });
});
