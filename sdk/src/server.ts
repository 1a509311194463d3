import { type ClientOptions, createCaller, paginator } from './call.js';
import { secretKeyOperations } from './generated/bindings.js';

export interface ServerClientOptions extends ClientOptions {
  /** The app's secret key (svc_live_… or svc_test_…): keep it on your server. */
  secretKey: string;
}

/**
 * The integrator's server's client: every operation, named after its operation id
 * (`storage.uploads.create` → `client.storage.uploads.create({ body })`), each answering its typed
 * data with what it cost; `call` takes the id itself, and `paginate` walks a list's cursors.
 */
export function createServerClient(options: ServerClientOptions) {
  const call = createCaller(options, () => ({ authorization: `Bearer ${options.secretKey}` }));
  return {
    ...secretKeyOperations(call),
    call,
    paginate: paginator(call),
  };
}

export type ServerClient = ReturnType<typeof createServerClient>;
