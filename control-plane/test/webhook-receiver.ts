import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ReceivedRequest {
  headers: IncomingHttpHeaders;
  body: string;
  /** The event the body carries (its `id`). */
  eventId: string;
}

export interface Answer {
  status: number;
  body?: string;
  headers?: Record<string, string>;
  /** Held this long before answering (a slow or stalled receiver). */
  delayMs?: number;
}

export interface Receiver {
  url: string;
  port: number;
  received: ReceivedRequest[];
  /** Requests being answered right now, and the most there ever were at once. */
  inFlight: number;
  maxInFlight: number;
  /** Resolves once `count` requests arrived in all; rejects after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/**
 * A real HTTP receiver on loopback for webhook deliveries: it records every request in full and
 * answers as `answer` says (by default 200 at once). `answer` gets the request and its index.
 */
export async function startReceiver(
  answer: (request: ReceivedRequest, index: number) => Answer = () => ({ status: 200 }),
): Promise<Receiver> {
  const waiters: { count: number; resolve: () => void }[] = [];
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    let eventId = '';
    try {
      eventId = String((JSON.parse(body) as { id?: unknown }).id ?? '');
    } catch {
      // Not an event body: recorded as it came.
    }
    const received: ReceivedRequest = { headers: request.headers, body, eventId };
    const index = receiver.received.push(received) - 1;
    for (const waiter of waiters.filter((w) => receiver.received.length >= w.count)) waiter.resolve();
    const reply = answer(received, index);
    receiver.inFlight += 1;
    receiver.maxInFlight = Math.max(receiver.maxInFlight, receiver.inFlight);
    try {
      if (reply.delayMs) await sleep(reply.delayMs);
      if (!response.destroyed) {
        response.writeHead(reply.status, reply.headers ?? {});
        response.end(reply.body ?? '');
      }
    } finally {
      receiver.inFlight -= 1;
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  const receiver: Receiver = {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    received: [],
    inFlight: 0,
    maxInFlight: 0,
    waitFor: (count, timeoutMs = 10_000) =>
      new Promise((resolve, reject) => {
        const done = () => {
          clearTimeout(timer);
          resolve(receiver.received);
        };
        const timer = setTimeout(
          () => reject(new Error(`${receiver.received.length} of ${count} requests in ${timeoutMs} ms`)),
          timeoutMs,
        );
        if (receiver.received.length >= count) done();
        else waiters.push({ count, resolve: done });
      }),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return receiver;
}
