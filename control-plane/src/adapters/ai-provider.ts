import { UpstreamError } from '../platform/errors.js';

/** A message of a chat with the model (OpenAI's roles). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** What the provider answered, and the tokens it reports having read and written. */
export interface Completion {
  text: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  finishReason: string;
}

export interface Moderation {
  flagged: boolean;
  /** The categories it flagged. */
  categories: string[];
  model: string;
}

/** The provider refused the input itself (a prompt longer than its context, say): the caller's doing. */
export class ProviderRefusal extends Error {
  constructor(readonly detail: string) {
    super(detail);
    this.name = 'ProviderRefusal';
  }
}

const PROVIDER = 'AI provider';

/**
 * The control plane's only client of an AI provider: the OpenAI-compatible HTTP API of whichever one
 * the operator names (the bundled ai/serve.py by default). A call that fails, or takes longer than
 * `timeoutMs`, is a 503 (UpstreamError); `signal` (the caller gone) cancels the provider's work.
 */
export function createAiProvider(options: {
  baseUrl: string;
  /** Where /moderations is, when not beside the chat endpoints (empty: baseUrl). */
  moderationUrl: string;
  apiKey: string;
  timeoutMs: number;
}) {
  const base = options.baseUrl.replace(/\/$/, '');
  const moderationBase = (options.moderationUrl || options.baseUrl).replace(/\/$/, '');
  const headers = {
    'content-type': 'application/json',
    ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
  };

  async function post(url: string, body: object, signal: AbortSignal): Promise<Record<string, unknown>> {
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.any([signal, AbortSignal.timeout(options.timeoutMs)]),
      });
    } catch (error) {
      const timedOut = (error as Error).name === 'TimeoutError';
      throw new UpstreamError(
        PROVIDER,
        timedOut ? `no answer within ${options.timeoutMs} ms` : `unreachable: ${(error as Error).message}`,
      );
    }
    const text = await response.text().catch(() => '');
    // The provider's 400 is about the input (too long for its context): the caller's to fix.
    if (response.status === 400) throw new ProviderRefusal(text.slice(0, 300));
    if (!response.ok) throw new UpstreamError(PROVIDER, `${url}: ${response.status} ${text.slice(0, 200)}`);
    try {
      return JSON.parse(text) as Record<string, unknown>;
    } catch {
      throw new UpstreamError(PROVIDER, `${url}: not JSON: ${text.slice(0, 200)}`);
    }
  }

  return {
    /** Whether a provider is configured at all (the spec's 503 otherwise). */
    configured: base !== '',

    /** One chat completion (a generation is a chat of one user message). */
    complete: async (
      request: { model: string; messages: readonly ChatMessage[]; maxTokens: number; temperature: number },
      signal: AbortSignal,
    ): Promise<Completion> => {
      const answer = await post(
        `${base}/chat/completions`,
        {
          model: request.model,
          messages: request.messages,
          max_tokens: request.maxTokens,
          temperature: request.temperature,
          stream: false,
        },
        signal,
      );
      const choice = (answer.choices as { message?: { content?: string }; finish_reason?: string }[])?.[0];
      const usage = answer.usage as { prompt_tokens?: number; completion_tokens?: number } | undefined;
      if (typeof choice?.message?.content !== 'string')
        throw new UpstreamError(
          PROVIDER,
          `no message in its answer: ${JSON.stringify(answer).slice(0, 200)}`,
        );
      return {
        text: choice.message.content,
        model: typeof answer.model === 'string' ? answer.model : request.model,
        promptTokens: usage?.prompt_tokens ?? 0,
        completionTokens: usage?.completion_tokens ?? 0,
        finishReason: choice.finish_reason ?? 'stop',
      };
    },

    moderate: async (request: { model: string; text: string }, signal: AbortSignal): Promise<Moderation> => {
      const answer = await post(
        `${moderationBase}/moderations`,
        { model: request.model, input: request.text },
        signal,
      );
      const result = (answer.results as { flagged?: boolean; categories?: Record<string, boolean> }[])?.[0];
      if (typeof result?.flagged !== 'boolean')
        throw new UpstreamError(PROVIDER, `no result in its answer: ${JSON.stringify(answer).slice(0, 200)}`);
      return {
        flagged: result.flagged,
        categories: Object.entries(result.categories ?? {})
          .filter(([, flagged]) => flagged)
          .map(([category]) => category),
        model: typeof answer.model === 'string' ? answer.model : request.model,
      };
    },
  };
}

export type AiProvider = ReturnType<typeof createAiProvider>;
