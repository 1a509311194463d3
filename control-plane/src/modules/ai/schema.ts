import { Type } from '@sinclair/typebox';
import { literalUnion } from '../../platform/schemas.js';

/**
 * Input limits (docs/ai.md). Characters bound what a request carries; the provider's context bounds
 * tokens (the bundled model's is 2,048 per request, prompt and answer together: a longer one is 422).
 */
export const AI_LIMITS = {
  promptChars: 8_000,
  systemChars: 4_000,
  messages: 50,
  messageChars: 8_000,
  moderateChars: 10_000,
  maxTokens: 2_000,
} as const;

const MaxTokens = (fallback: number) =>
  Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: AI_LIMITS.maxTokens,
      description: `Most tokens to write; default ${fallback}`,
    }),
  );
const Temperature = Type.Optional(
  Type.Number({
    minimum: 0,
    maximum: 2,
    description: 'Sampling temperature; default 0: the same input gives the same answer',
  }),
);
const Text = (max: number, description: string) =>
  Type.String({ minLength: 1, maxLength: max, pattern: '\\S', description });

export const GenerateRequest = Type.Object(
  {
    prompt: Text(AI_LIMITS.promptChars, 'What to write about'),
    system: Type.Optional(Text(AI_LIMITS.systemChars, 'Instructions that frame the answer')),
    max_tokens: MaxTokens(300),
    temperature: Temperature,
  },
  { additionalProperties: false },
);
export const GenerateResult = Type.Object(
  {
    text: Type.String(),
    model: Type.String(),
    cost_milli: Type.Integer({ description: 'The call’s cost in thousandths of a dollar (X-Svc-Cost-Usd)' }),
  },
  { additionalProperties: false },
);

export const ChatRequest = Type.Object(
  {
    messages: Type.Array(
      Type.Object(
        {
          role: literalUnion(['user', 'assistant', 'system'] as const),
          content: Text(AI_LIMITS.messageChars, 'The message'),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: AI_LIMITS.messages, description: 'The conversation so far, oldest first' },
    ),
    system: Type.Optional(Text(AI_LIMITS.systemChars, 'Instructions that frame the replies')),
    max_tokens: MaxTokens(500),
    temperature: Temperature,
  },
  { additionalProperties: false },
);
export const ChatResult = Type.Object(
  {
    reply: Type.String(),
    role: Type.Literal('assistant'),
    model: Type.String(),
    cost_usd: Type.Number({ description: 'The call’s cost in dollars (X-Svc-Cost-Usd)' }),
  },
  { additionalProperties: false },
);

export const ModerateRequest = Type.Object(
  { text: Text(AI_LIMITS.moderateChars, 'The text to check') },
  { additionalProperties: false },
);
export const ModerateResult = Type.Object(
  {
    flagged: Type.Boolean(),
    categories: Type.Array(Type.String(), {
      description: 'What it was flagged for, in OpenAI’s category names (harassment, hate, …)',
    }),
    model: Type.String(),
  },
  { additionalProperties: false },
);
