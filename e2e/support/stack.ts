import { loadSettings } from '../../control-plane/src/config/load.js';
import type { Settings } from '../../control-plane/src/config/schema.js';
import { type Container, createContainer } from '../../control-plane/src/container.js';

/**
 * The e2e tests drive the running test stack: the control plane process at SVC_PUBLIC_URL (which
 * ejabberd asks about logins) and the real servers. Customers are made through the control
 * plane's own services against the same database, as the admin CLI does.
 */
export function stackSettings(): Settings {
  return loadSettings(process.env);
}

export async function openContainer(): Promise<Container> {
  return createContainer(stackSettings());
}

/** Customers are made the way the integration tests make them. */
export { createCustomer, ejabberdAsOperator, meterNow } from '../../control-plane/test/support.js';

/** Whoever calls the API: only its secret key matters here. */
export interface Customer {
  token: string;
}

/** A call to the running control plane, as an integrator's server makes it (`headers`: an Idempotency-Key…). */
export async function api<T = Record<string, unknown>>(
  customer: Customer,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: T }> {
  const response = await fetch(`${stackSettings().SVC_PUBLIC_URL}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${customer.token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as T };
}

/**
 * Reserves an upload of five bytes of text under an Idempotency-Key: the priced call that the tests
 * killing servers under load retry with the same key until it answers.
 */
export function reserveKeyedUpload(customer: Customer, key: string, name: string) {
  return api(
    customer,
    'POST',
    '/v1/storage/uploads',
    { name, content_type: 'text/plain', size_bytes: 5 },
    { 'idempotency-key': key },
  );
}
