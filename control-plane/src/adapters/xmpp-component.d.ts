// @xmpp/component ships no typings: what the messaging component uses of it.
declare module '@xmpp/component' {
  import type { EventEmitter } from 'node:events';

  export interface XmlElement {
    name: string;
    attrs: Record<string, string | undefined>;
    children: (XmlElement | string)[];
    is(name: string, xmlns?: string): boolean;
    getChild(name: string, xmlns?: string): XmlElement | undefined;
    getChildText(name: string, xmlns?: string): string | null;
    toString(): string;
  }

  export function xml(
    name: string,
    attrs?: Record<string, string | undefined> | null,
    ...children: (XmlElement | string | undefined)[]
  ): XmlElement;

  export interface Component extends EventEmitter {
    status: string;
    options: { service: string; domain: string };
    start(): Promise<unknown>;
    stop(): Promise<unknown>;
    send(element: XmlElement): Promise<void>;
    /** Raw text onto the stream (a whitespace keepalive). */
    write(text: string): Promise<void>;
    reconnect: { stop(): void; reconnect(): Promise<void> };
  }

  export function component(options: { service: string; domain: string; password: string }): Component;
}
