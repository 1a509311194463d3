/** Rows one pruning statement deletes at most: short statements and locks, and bounded WAL each. */
export const PRUNE_BATCH = 10_000;

/**
 * Deletes a batch at a time until a batch comes back short (nothing is left to prune); answers how
 * many rows went in all.
 */
export async function pruneInBatches(
  deleteBatch: (limit: number) => Promise<number>,
): Promise<{ pruned: number }> {
  let pruned = 0;
  for (;;) {
    const deleted = await deleteBatch(PRUNE_BATCH);
    pruned += deleted;
    if (deleted < PRUNE_BATCH) return { pruned };
  }
}
