/**
 * AI through the whole HTTP pipeline of one process on the test stack, beside the provider called
 * directly (the bundled ai/serve.py at SVC_AI_BASE_URL) with the same requests, in turns:
 *   1. generated tokens per second: `prompts` prompts at temperature 0 (the same answers both ways,
 *      so the direct calls' token counts hold for the API's), `concurrency` in flight;
 *   2. moderation calls per second, `concurrency` in flight.
 *
 *   npm run stack -- up --profile test && npx tsx bench/ai.ts [prompts] [max_tokens] [concurrency] [moderations]
 */
import { buildApp } from '../control-plane/src/app.js';
import { loadSettings } from '../control-plane/src/config/load.js';
import { createContainer } from '../control-plane/src/container.js';
import { createCustomer } from '../control-plane/test/support.js';
import { injectOk, timed, useTestStackSettings } from './support.js';

useTestStackSettings();
const prompts = Number(process.argv[2] ?? 24);
const maxTokens = Number(process.argv[3] ?? 64);
const concurrency = Number(process.argv[4] ?? 2);
const moderations = Number(process.argv[5] ?? 400);
const settings = loadSettings(process.env);
const container = await createContainer(settings);
const app = await buildApp(container, { logger: false });
await app.ready();
const customer = await createCustomer(container, { plan: 'scale', dailyRequestCap: 100_000_000 });
const key = { authorization: `Bearer ${customer.token}` };
const provider = { 'content-type': 'application/json', authorization: `Bearer ${settings.SVC_AI_API_KEY}` };

const TOPICS = ['the sea', 'a city at night', 'bread', 'a lost key', 'winter', 'a robot', 'tea', 'a bridge'];
const prompt = (i: number) => `Write two sentences about ${TOPICS[i % TOPICS.length]} (${i}).`;

/** The provider itself: its completion tokens for each prompt. */
async function direct(i: number) {
  const response = await fetch(`${settings.SVC_AI_BASE_URL}/chat/completions`, {
    method: 'POST',
    headers: provider,
    body: JSON.stringify({
      model: settings.SVC_AI_GENERATE_MODEL,
      messages: [{ role: 'user', content: prompt(i) }],
      max_tokens: maxTokens,
      temperature: 0,
    }),
  });
  const answer = (await response.json()) as { usage: { completion_tokens: number } };
  return answer.usage.completion_tokens;
}
const viaApi = (i: number) =>
  injectOk(app, 'POST', '/v1/ai/generate', key, { prompt: prompt(i), max_tokens: maxTokens });

console.log(
  `AI: ${prompts} prompts of up to ${maxTokens} tokens, ${concurrency} in flight; node ${process.version}`,
);
const tokens: number[] = [];
for (let i = 0; i < prompts; i++) tokens[i] = await direct(i); // warms the provider's cache of prompts
const total = tokens.reduce((sum, count) => sum + count, 0);

const rates = { direct: [] as number[], api: [] as number[] };
for (let round = 0; round < 4; round++) {
  for (const [path, call] of [
    ['direct', direct],
    ['api', viaApi],
  ] as const) {
    let next = 0;
    const run = await timed(prompts, concurrency, () => call(next++));
    rates[path].push(total / (run.elapsed / 1000));
  }
}
const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
console.log(
  `  generated tokens/s: through the API ${mean(rates.api).toFixed(1)}, the provider directly ${mean(rates.direct).toFixed(1)}; ratio ${(mean(rates.api) / mean(rates.direct)).toFixed(3)} (goal ≥ 0.95)`,
);

const moderationRates = { direct: [] as number[], api: [] as number[] };
const text = (i: number) => `a comment number ${i}, nothing offensive in it`;
for (let round = 0; round < 4; round++) {
  let next = 0;
  const directRun = await timed(moderations / 4, 4, () =>
    fetch(`${settings.SVC_AI_MODERATION_URL}/moderations`, {
      method: 'POST',
      headers: provider,
      body: JSON.stringify({ model: settings.SVC_AI_MODERATION_MODEL, input: text(next++) }),
    }).then((response) => response.json()),
  );
  moderationRates.direct.push(moderations / 4 / (directRun.elapsed / 1000));
  const apiRun = await timed(moderations / 4, 4, () =>
    injectOk(app, 'POST', '/v1/ai/moderate', key, { text: text(next++) }),
  );
  moderationRates.api.push(moderations / 4 / (apiRun.elapsed / 1000));
}
console.log(
  `  moderation calls/s: through the API ${mean(moderationRates.api).toFixed(0)}, the provider directly ${mean(moderationRates.direct).toFixed(0)}; ratio ${(mean(moderationRates.api) / mean(moderationRates.direct)).toFixed(2)}`,
);

await app.close();
await container.close();
