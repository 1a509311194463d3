/** A rejection of the app's credential callback: its server said no (or could not be asked). */
export class CallbackRefusal extends Error {
  constructor(cause: unknown) {
    super('the credential callback failed', { cause });
  }
}

/** How long before its expiry a held credential is renewed, unless the app says otherwise. */
const DEFAULT_RENEW_BEFORE_SECONDS = 30;

/**
 * A credential from the app's server, kept across reconnections while it is valid: renewed when it
 * expires within `renewBeforeSeconds` (default 30), or when the server refused it (replaced,
 * revoked). `fresh` says it was fetched for the connection being made, so that a refusal of a fresh
 * one is final.
 */
export async function holdCredential<T>(
  fetchCredential: () => Promise<T>,
  expiresAt: (credential: T, fetchedAt: number) => number,
  renewBeforeSeconds = DEFAULT_RENEW_BEFORE_SECONDS,
) {
  const renewBeforeMs = renewBeforeSeconds * 1_000;
  const fetchOne = async () => {
    try {
      return await fetchCredential();
    } catch (error) {
      throw new CallbackRefusal(error);
    }
  };
  const first = await fetchCredential();
  const held = {
    current: first,
    fresh: true,
    expiresAt: expiresAt(first, Date.now()),
    expiring: () => held.expiresAt - Date.now() <= renewBeforeMs,
    renew: async () => {
      held.current = await fetchOne();
      held.expiresAt = expiresAt(held.current, Date.now());
      held.fresh = true;
    },
  };
  return held;
}

/** A session's end: `ended` settles with the first value given to `end`. */
export function endSignal<T>() {
  let end: (value: T) => void = () => {};
  const ended = new Promise<T>((resolve) => {
    end = resolve;
  });
  return { ended, end };
}
