import { route } from '../../platform/route.js';
import {
  ChatRequest,
  ChatResult,
  GenerateRequest,
  GenerateResult,
  ModerateRequest,
  ModerateResult,
} from './schema.js';
import type { AiService } from './service.js';

/** What every AI endpoint shares: a secret key's, on paid plans, priced per call, its failures. */
const aiOperation = {
  method: 'POST' as const,
  auth: 'secret-key' as const,
  tags: ['ai'],
  description:
    'Pro and Scale plans only (402 on Free). No provider configured, or one that fails or takes longer than the configured timeout: 503, nothing charged. A busy provider: 429 with Retry-After.',
  errors: [402] as const,
  paidPlan: true,
};

/** The AI endpoints (docs/ai.md), through the fair inference queue. */
export const aiRoutes = (ai: AiService) => [
  route({
    ...aiOperation,
    operationId: 'ai.generate',
    url: '/v1/ai/generate',
    summary: 'Generate text from a prompt',
    body: GenerateRequest,
    response: GenerateResult,
    price: { product: 'ai', metric: 'generate_calls' },
    costField: 'cost_milli',
    handler: ({ caller, body, signal }) => ai.generate(caller, body, signal),
  }),
  route({
    ...aiOperation,
    operationId: 'ai.chat',
    url: '/v1/ai/chat',
    summary: 'The assistant’s reply to a conversation',
    body: ChatRequest,
    response: ChatResult,
    price: { product: 'ai', metric: 'chat_calls' },
    costField: 'cost_usd',
    handler: ({ caller, body, signal }) => ai.chat(caller, body, signal),
  }),
  route({
    ...aiOperation,
    operationId: 'ai.moderate',
    url: '/v1/ai/moderate',
    summary:
      'Whether a text is offensive, and for what (moderate buzzes, comments, names before posting them)',
    body: ModerateRequest,
    response: ModerateResult,
    price: { product: 'ai', metric: 'moderate_calls' },
    handler: ({ caller, body, signal }) => ai.moderate(caller, body, signal),
  }),
];
