/**
 * Runs `task` on every item, at most `limit` at once, each started as soon as another ends (not in
 * batches, where the slowest item holds up its whole batch); answers the results in the items' order.
 * A task that throws rejects the run, as Promise.all does: no task starts after it, and those under
 * way finish unawaited.
 */
export async function mapAtMost<T, R>(
  items: readonly T[],
  limit: number,
  task: (item: T) => Promise<R>,
): Promise<R[]> {
  if (!(limit >= 1)) throw new RangeError(`mapAtMost needs a limit of at least 1, not ${limit}`);
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (next < items.length && !failed) {
      const index = next++;
      try {
        results[index] = await task(items[index]!);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
