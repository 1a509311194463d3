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

/** One server-sent event's data, as a chunk of a streamed completion (OpenAI's shape). */
interface CompletionChunk {
  model?: string;
  choices?: { delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  error?: unknown;
}

/**
 * The control plane's only client of an AI provider: the OpenAI-compatible HTTP API of whichever one
 * the operator names (the bundled ai/serve.py by default). Completions are streamed, so `timeoutMs`
 * bounds how long the provider may stay silent (before its first token, or between two), not how long
 * a long answer takes: a provider that keeps writing is not failing, and max_tokens bounds the rest.
 * A call that fails, or goes silent that long, is a 503 (UpstreamError); `signal` (the caller gone)
 * cancels the provider's work.
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
  /**
   * POSTs `body` and, once the answer is a 2xx, reads it: whole (`json`), or line by line as it comes
   * (`lines`). The provider may stay silent for `timeoutMs` at most: before its headers, and then, for
   * `lines`, between two pieces of its answer, or, for `json`, until its end.
   */
  async function open(url: string, body: object, signal: AbortSignal) {
    const quiet = new AbortController();
    const timer = setTimeout(() => quiet.abort(), options.timeoutMs);
    const failed = (error: unknown) =>
      error instanceof UpstreamError
        ? error
        : quiet.signal.aborted
          ? new UpstreamError(PROVIDER, `no answer within ${options.timeoutMs} ms`)
          : new UpstreamError(PROVIDER, `unreachable: ${(error as Error).message}`);
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.any([signal, quiet.signal]),
      });
    } catch (error) {
      clearTimeout(timer);
      throw failed(error);
    }
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      clearTimeout(timer);
      // The provider's 400 is about the input (too long for its context): the caller's to fix.
      if (response.status === 400) throw new ProviderRefusal(text.slice(0, 300));
      throw new UpstreamError(PROVIDER, `${url}: ${response.status} ${text.slice(0, 200)}`);
    }
    const parsed = (text: string) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new UpstreamError(PROVIDER, `${url}: not JSON: ${text.slice(0, 200)}`);
      }
    };
    return {
      streamed: response.headers.get('content-type')?.startsWith('text/event-stream') === true,
      parsed,
      json: async () => {
        try {
          return parsed(await response.text()) as Record<string, unknown>;
        } catch (error) {
          throw failed(error);
        } finally {
          clearTimeout(timer);
        }
      },
      lines: async function* (): AsyncGenerator<string> {
        const reader = response.body?.getReader();
        const decoder = new TextDecoder();
        let pending = '';
        try {
          for (;;) {
            const read = await reader?.read();
            if (!read || read.done) break;
            timer.refresh();
            pending += decoder.decode(read.value, { stream: true });
            const lines = pending.split('\n');
            pending = lines.pop() ?? '';
            yield* lines;
          }
          yield pending + decoder.decode();
        } catch (error) {
          throw failed(error);
        } finally {
          clearTimeout(timer);
          // A consumer that stops early (the end of the answer, or an error in it) drops the rest.
          void reader?.cancel().catch(() => {});
        }
      },
    };
  }

  const post = async (url: string, body: object, signal: AbortSignal) =>
    (await open(url, body, signal)).json();

  /** The chunks of a streamed answer, each as soon as its line is in; a provider that does not stream is one. */
  async function* chunks(url: string, body: object, signal: AbortSignal): AsyncGenerator<CompletionChunk> {
    const call = await open(url, body, signal);
    if (!call.streamed) {
      const answer = (await call.json()) as {
        model?: string;
        choices?: { message?: { content?: string }; finish_reason?: string }[];
        usage?: CompletionChunk['usage'];
      };
      const choice = answer.choices?.[0];
      if (typeof choice?.message?.content !== 'string')
        throw new UpstreamError(
          PROVIDER,
          `no message in its answer: ${JSON.stringify(answer).slice(0, 200)}`,
        );
      yield {
        model: answer.model,
        choices: [{ delta: { content: choice.message.content }, finish_reason: choice.finish_reason }],
        usage: answer.usage,
      };
      return;
    }
    for await (const line of call.lines()) {
      // Server-sent events: `data: <json>` lines, a blank line between events, `[DONE]` last.
      if (!line.startsWith('data:')) continue;
      const data = line.slice('data:'.length).trim();
      if (data === '[DONE]') return;
      const chunk = call.parsed(data) as CompletionChunk;
      if (chunk.error !== undefined)
        throw new UpstreamError(
          PROVIDER,
          `an error mid-answer: ${JSON.stringify(chunk.error).slice(0, 200)}`,
        );
      yield chunk;
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
      let text = '';
      let model = request.model;
      let finishReason = 'stop';
      let usage: CompletionChunk['usage'];
      let answered = false;
      for await (const chunk of chunks(
        `${base}/chat/completions`,
        {
          model: request.model,
          messages: request.messages,
          max_tokens: request.maxTokens,
          temperature: request.temperature,
          stream: true,
          stream_options: { include_usage: true },
        },
        signal,
      )) {
        const choice = chunk.choices?.[0];
        answered ||= choice !== undefined;
        text += choice?.delta?.content ?? '';
        if (choice?.finish_reason) finishReason = choice.finish_reason;
        if (typeof chunk.model === 'string') model = chunk.model;
        if (chunk.usage) usage = chunk.usage;
      }
      if (!answered) throw new UpstreamError(PROVIDER, 'its answer held no message');
      return {
        text,
        model,
        promptTokens: usage?.prompt_tokens ?? 0,
        completionTokens: usage?.completion_tokens ?? 0,
        finishReason,
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
