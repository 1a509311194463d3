import { UpstreamError } from '../platform/errors.js';

/** A message of a chat with the model (OpenAI's roles). */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** What the provider answered. */
export interface Completion {
  text: string;
  model: string;
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
  error?: unknown;
}

/** How many times the silence allowed a whole answer may take: a bound however the provider trickles. */
const ANSWER_TIMEOUTS = 10;

/**
 * The data of each event of a server-sent event stream (the HTML standard's parsing): lines end in
 * CRLF, LF or CR; `data:` lines (one space after the colon dropped) make an event's data, joined by
 * LF; comments (`:`) and other fields are skipped; a blank line ends an event, and one the stream
 * leaves unfinished is dropped.
 */
export async function* eventData(stream: AsyncIterable<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let pending = '';
  let data: string[] = [];
  let carriageReturn = false;
  for await (const bytes of stream) {
    let text = decoder.decode(bytes, { stream: true });
    // A CR ending the last piece may be half of a CRLF: its LF is not a second line end.
    if (carriageReturn && text.startsWith('\n')) text = text.slice(1);
    carriageReturn = text.endsWith('\r');
    pending += text;
    const lines = pending.split(/\r\n|\r|\n/);
    pending = lines.pop() ?? '';
    for (const line of lines) {
      if (line === '') {
        if (data.length > 0) yield data.join('\n');
        data = [];
      } else if (line === 'data' || line.startsWith('data:')) {
        const value = line.slice('data:'.length);
        data.push(value.startsWith(' ') ? value.slice(1) : value);
      }
    }
  }
}

/**
 * The control plane's only client of an AI provider: the OpenAI-compatible HTTP API of whichever one
 * the operator names (the bundled ai/serve.py by default). Completions are streamed, so `timeoutMs`
 * bounds how long the provider may stay silent (before its first token, or between two), not how long
 * a long answer takes: a provider that keeps writing is not failing, and max_tokens bounds the rest
 * (with ANSWER_TIMEOUTS times `timeoutMs` in all, whatever the provider sends). A call that fails, or
 * goes silent that long, is a 503 (UpstreamError); `signal` (the caller gone) cancels the provider's
 * work.
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
   * POSTs `body` and, once the answer is a 2xx, reads it: whole (`json`), or event by event as it comes
   * (`events`). The provider may stay silent for `timeoutMs` at most: before its headers, then until
   * the end of a whole answer, or between two events (`heard` starts that time again); and an answer
   * takes ANSWER_TIMEOUTS times that at most in all.
   */
  async function open(url: string, body: object, signal: AbortSignal) {
    const stop = new AbortController();
    let stopped = '';
    const after = (ms: number, why: string) =>
      setTimeout(() => {
        stopped = why;
        stop.abort();
      }, ms);
    const quiet = after(options.timeoutMs, `no answer within ${options.timeoutMs} ms`);
    const whole = options.timeoutMs * ANSWER_TIMEOUTS;
    const overall = after(whole, `no complete answer within ${whole} ms`);
    const done = () => {
      clearTimeout(quiet);
      clearTimeout(overall);
    };
    const failed = (error: unknown) =>
      error instanceof UpstreamError
        ? error
        : new UpstreamError(PROVIDER, stopped || `unreachable: ${(error as Error).message}`);
    let response: Response;
    try {
      response = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.any([signal, stop.signal]),
      });
    } catch (error) {
      done();
      throw failed(error);
    }
    if (!response.ok) {
      const text = await response.text().catch(() => '');
      done();
      // The provider's 400 is about the input (too long for its context): the caller's to fix.
      if (response.status === 400) throw new ProviderRefusal(text.slice(0, 300));
      throw new UpstreamError(PROVIDER, `${url}: ${response.status} ${text.slice(0, 200)}`);
    }
    /** A JSON object, or the provider did not answer as one should. */
    const parsed = (text: string): Record<string, unknown> => {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        throw new UpstreamError(PROVIDER, `${url}: not JSON: ${text.slice(0, 200)}`);
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value))
        throw new UpstreamError(PROVIDER, `${url}: not a JSON object: ${text.slice(0, 200)}`);
      return value as Record<string, unknown>;
    };
    // Taken by `events` only: a body with a reader cannot be read whole.
    let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
    const bytes = async function* () {
      reader = response.body?.getReader();
      for (;;) {
        const read = await reader?.read();
        if (!read || read.done) return;
        yield read.value;
      }
    };
    return {
      streamed: /^text\/event-stream/i.test(response.headers.get('content-type') ?? ''),
      parsed,
      heard: () => quiet.refresh(),
      json: async () => {
        try {
          return parsed(await response.text());
        } catch (error) {
          throw failed(error);
        } finally {
          done();
        }
      },
      events: async function* (): AsyncGenerator<string> {
        try {
          yield* eventData(bytes());
        } catch (error) {
          throw failed(error);
        } finally {
          done();
          // A consumer that stops early (the end of the answer, or an error in it) drops the rest.
          void reader?.cancel().catch(() => {});
        }
      },
    };
  }

  const post = async (url: string, body: object, signal: AbortSignal) =>
    (await open(url, body, signal)).json();

  /**
   * The chunks of a streamed answer, each as soon as it is in; a provider that does not stream gives
   * one. An answer must end as streams do ([DONE], or a chunk saying why it finished): one cut short
   * is not taken for a whole one.
   */
  async function* chunks(url: string, body: object, signal: AbortSignal): AsyncGenerator<CompletionChunk> {
    const call = await open(url, body, signal);
    if (!call.streamed) {
      const answer = (await call.json()) as {
        model?: string;
        choices?: { message?: { content?: string }; finish_reason?: string }[];
      };
      const choice = answer.choices?.[0];
      if (typeof choice?.message?.content !== 'string')
        throw new UpstreamError(
          PROVIDER,
          `no message in its answer: ${JSON.stringify(answer).slice(0, 200)}`,
        );
      yield { model: answer.model, choices: [{ delta: { content: choice.message.content } }] };
      return;
    }
    let finished = false;
    for await (const data of call.events()) {
      call.heard();
      if (data === '[DONE]') return;
      const chunk = call.parsed(data) as CompletionChunk;
      if (chunk.error !== undefined)
        throw new UpstreamError(
          PROVIDER,
          `an error mid-answer: ${JSON.stringify(chunk.error).slice(0, 200)}`,
        );
      finished ||= Boolean(chunk.choices?.[0]?.finish_reason);
      yield chunk;
    }
    if (!finished) throw new UpstreamError(PROVIDER, 'its answer stopped short');
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
      let answered = false;
      for await (const chunk of chunks(
        `${base}/chat/completions`,
        {
          model: request.model,
          messages: request.messages,
          max_tokens: request.maxTokens,
          temperature: request.temperature,
          stream: true,
        },
        signal,
      )) {
        const choice = chunk.choices?.[0];
        answered ||= choice !== undefined;
        text += choice?.delta?.content ?? '';
        if (typeof chunk.model === 'string') model = chunk.model;
      }
      if (!answered) throw new UpstreamError(PROVIDER, 'its answer held no message');
      return { text, model };
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
