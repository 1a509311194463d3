/** Runs `work` on every item, at most `limit` at a time; the first failure stops the loop. */
export async function forEachConcurrently<T>(
  items: AsyncIterable<T> | Iterable<T>,
  limit: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  const running = new Set<Promise<void>>();
  for await (const item of items) {
    const task: Promise<void> = work(item).finally(() => running.delete(task));
    // Handled here so that a second failure, after the first stopped the loop, is not an unhandled one.
    task.catch(() => {});
    running.add(task);
    if (running.size >= limit) await Promise.race(running);
  }
  await Promise.all(running);
}
