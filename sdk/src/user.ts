import { type Caller, type ClientOptions, createCaller, paginator } from './call.js';
import { SvcApiError } from './errors.js';
import { userTokenOperations } from './generated/bindings.js';

export interface UserClientOptions extends ClientOptions {
  /**
   * The user's token (from your app's server, which mints it with its secret key), or a function that
   * fetches one: it is called for the first call, and again once when the API refuses the token
   * (401: expired or revoked), and the call is retried with the new one.
   */
  token: string | (() => Promise<string>);
}

/**
 * A signed-in user's client, for apps and browsers (no secret key): every `/v1/me/…` operation named
 * after its operation id (`me.profile.read` → `client.me.profile.read()`), typed like the server's.
 */
export function createUserClient(options: UserClientOptions) {
  const fetchToken = typeof options.token === 'function' ? options.token : undefined;
  let token = typeof options.token === 'string' ? options.token : undefined;
  const send = createCaller(options, () => ({ authorization: `Bearer ${token}` }));
  const call = (async (id, ...args) => {
    if (token === undefined && fetchToken) token = await fetchToken();
    try {
      return await send(id, ...args);
    } catch (error) {
      if (!(fetchToken && error instanceof SvcApiError && error.status === 401)) throw error;
      token = await fetchToken();
      return send(id, ...args);
    }
  }) as Caller;
  return { ...userTokenOperations(call), call, paginate: paginator(call) };
}

export type UserClient = ReturnType<typeof createUserClient>;
