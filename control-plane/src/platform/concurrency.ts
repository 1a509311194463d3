/**
 * Runs `task` on every item, at most `limit` at once, each started as soon as another ends (not in
 * batches, where the slowest item holds up its whole batch); answers the results in the items' order.
 * A task that throws rejects the whole run, as Promise.all does; the tasks under way still finish.
 */
export async function mapAtMost<T, R>(
  items: readonly T[],
  limit: number,
  task: (item: T) => Promise<R>,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
