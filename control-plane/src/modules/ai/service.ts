import { type AiProvider, type ChatMessage, ProviderRefusal } from '../../adapters/ai-provider.js';
import type { Principal } from '../../platform/caller.js';
import { errors, ServiceError } from '../../platform/errors.js';
import type { InferenceQueue } from './queue.js';

const unconfigured = () =>
  new ServiceError('service_unavailable', 'No AI provider is configured on this service', {
    code: 'AI_UNCONFIGURED',
  });

/**
 * Generation, chat and moderation on the configured provider (docs/ai.md), each through the fair
 * queue. The price is per call (the pipeline charges it once the answer is in); a provider that
 * fails or is too slow is a 503 and nothing is charged.
 */
export function createAiService(deps: {
  provider: AiProvider;
  queue: InferenceQueue;
  models: { generate: string; chat: string; moderation: string };
}) {
  async function queued<T>(principal: Principal, signal: AbortSignal, work: () => Promise<T>) {
    if (!deps.provider.configured) throw unconfigured();
    try {
      return await deps.queue.run(principal.appId, signal, work);
    } catch (error) {
      if (error instanceof ProviderRefusal)
        throw errors.validation([
          {
            in: 'body',
            field: 'max_tokens',
            message: `with the input, exceeds what the model takes: ${error.detail}`,
          },
        ]);
      throw error;
    }
  }

  const complete = (
    principal: Principal,
    signal: AbortSignal,
    model: string,
    messages: ChatMessage[],
    input: { max_tokens?: number; temperature?: number },
    defaultMaxTokens: number,
  ) =>
    queued(principal, signal, () =>
      deps.provider.complete(
        {
          model,
          messages,
          maxTokens: input.max_tokens ?? defaultMaxTokens,
          temperature: input.temperature ?? 0,
        },
        signal,
      ),
    );

  return {
    generate: async (
      principal: Principal,
      input: { prompt: string; system?: string; max_tokens?: number; temperature?: number },
      signal: AbortSignal,
    ) => {
      const messages: ChatMessage[] = [
        ...(input.system === undefined ? [] : [{ role: 'system' as const, content: input.system }]),
        { role: 'user', content: input.prompt },
      ];
      const completion = await complete(principal, signal, deps.models.generate, messages, input, 300);
      // cost_milli is set by the pipeline from the charge (X-Svc-Cost-Usd).
      return { text: completion.text, model: completion.model, cost_milli: 0 };
    },

    chat: async (
      principal: Principal,
      input: { messages: ChatMessage[]; system?: string; max_tokens?: number; temperature?: number },
      signal: AbortSignal,
    ) => {
      const messages: ChatMessage[] = [
        ...(input.system === undefined ? [] : [{ role: 'system' as const, content: input.system }]),
        ...input.messages,
      ];
      const completion = await complete(principal, signal, deps.models.chat, messages, input, 500);
      return { reply: completion.text, role: 'assistant' as const, model: completion.model, cost_usd: 0 };
    },

    /** Calls at the provider and waiting, in this process. */
    load: () => deps.queue.load(),

    moderate: (principal: Principal, input: { text: string }, signal: AbortSignal) =>
      queued(principal, signal, () =>
        deps.provider.moderate({ model: deps.models.moderation, text: input.text }, signal),
      ),
  };
}

export type AiService = ReturnType<typeof createAiService>;
