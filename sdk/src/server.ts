import {
  type Args,
  type CallOptions,
  type ClientOptions,
  createCaller,
  type Input,
  type Output,
} from './call.js';
import { secretKeyOperations } from './generated/bindings.js';
import type { OperationId } from './generated/operations.js';

/** Operations whose answer is a cursor page: `{ items, next_cursor }`. */
type PagedId = {
  [Id in OperationId]: Output<Id> extends { items: unknown[]; next_cursor: string | null } ? Id : never;
}[OperationId];
type ItemOf<Id extends PagedId> = Output<Id> extends { items: (infer Item)[] } ? Item : never;

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
    /** Every item of a list, page after page, following next_cursor until it is null. */
    async *paginate<Id extends PagedId>(
      id: Id,
      ...[input, callOptions]: Args<Id>
    ): AsyncGenerator<ItemOf<Id>> {
      let cursor: string | undefined;
      do {
        const query = {
          ...((input as { query?: object } | undefined)?.query ?? {}),
          ...(cursor ? { cursor } : {}),
        };
        const args = [{ ...(input ?? {}), query } as Input<Id>, callOptions as CallOptions] as Args<Id>;
        const page = (await call(id, ...args)).data as { items: ItemOf<Id>[]; next_cursor: string | null };
        yield* page.items;
        cursor = page.next_cursor ?? undefined;
      } while (cursor !== undefined);
    },
  };
}

export type ServerClient = ReturnType<typeof createServerClient>;
