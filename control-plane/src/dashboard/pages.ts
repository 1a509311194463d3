import type { AppRow } from '../modules/accounts/schema.js';
import type { Right, SessionRow } from '../modules/dashboard/schema.js';
import type { Client, Member } from '../modules/dashboard/service.js';
import type { KeyMode } from '../platform/caller.js';
import { errors } from '../platform/errors.js';
import type { Html } from './html.js';

/** A form's fields as posted (urlencoded): a name given twice has all its values. */
export type Form = Record<string, string | string[]>;

interface Context {
  params: Record<string, string>;
  query: Record<string, string>;
  form: Form;
  client: Client;
  csrf: string;
  path: string;
  /** The whole page: the shell (navigation, sign-out) around the body. */
  page(title: string, body: Html, options?: { app?: AppRow; mode?: KeyMode }): Html;
}

export interface MemberContext extends Context {
  member: Member;
  session: SessionRow;
  /** Clears the browser's session cookie (the session itself is ended by the service). */
  signOut(): void;
  /** Whether the member's role has a right: what a page offers follows the same table as what it takes. */
  can(right: Right): boolean;
}

export interface AnonymousContext extends Context {
  /** Signs the browser in with a new session's token, ending the one it had. */
  signIn(sessionToken: string): Promise<void>;
  member: Member | null;
}

export type PageResult = Html | { redirect: string } | { status: number; body: Html };

/**
 * One dashboard page or form action: its method, path, who may use it (a right of the signed-in
 * member's role, or `anonymous` for the sign-in and invitation forms) and its handler. Every POST is
 * checked for its CSRF token before the handler runs.
 */
export type PageDeclaration =
  | { method: 'GET' | 'POST'; url: string; access: Right; handle(ctx: MemberContext): Promise<PageResult> }
  | {
      method: 'GET' | 'POST';
      url: string;
      access: 'anonymous';
      handle(ctx: AnonymousContext): Promise<PageResult>;
    };

export const pages = (...declared: PageDeclaration[]) => declared;

/** A single text field of a form ('' when absent). */
export function field(form: Form, name: string): string {
  const value = form[name];
  return typeof value === 'string' ? value : (value?.[0] ?? '');
}

/** Every value of a field that may be given several times (checkboxes). */
export const fieldValues = (form: Form, name: string): string[] => {
  const value = form[name];
  return value === undefined ? [] : typeof value === 'string' ? [value] : value;
};

export function oneOf<T extends string>(form: Form, name: string, allowed: readonly T[]): T {
  const value = field(form, name);
  if (!(allowed as readonly string[]).includes(value))
    throw errors.invalidField('body', name, `must be one of ${allowed.join(', ')}`);
  return value as T;
}

/** The key mode of an app page: ?mode=live or test (the default: where a new app starts). */
export const modeOf = (query: Record<string, string>): KeyMode => (query.mode === 'live' ? 'live' : 'test');

/** A whole number from a query or form, within bounds, or the default when absent. */
export function intIn(value: string | undefined, name: string, min: number, max: number, fallback: number) {
  if (value === undefined || value === '') return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < min || number > max)
    throw errors.invalidField('query', name, `must be a whole number ${min}-${max}`);
  return number;
}

/** Whether a destructive form came back from its confirmation page. */
export const confirmed = (form: Form) => field(form, 'confirm') === 'yes';

/** The page a list link asks for: a size and, after the first page, the cursor it carries. */
export const pageQuery = (query: Record<string, string>, limit: number) => ({
  limit,
  ...(query.cursor ? { cursor: query.cursor } : {}),
});
