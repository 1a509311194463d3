import type { FastifyBaseLogger } from 'fastify';
import type { Container } from './container.js';
import { TEST_OBJECT_DAYS } from './modules/storage/schema.js';

/** How often the background work runs; each task is idempotent and safe on several replicas. */
export const MAINTENANCE_EVERY_MS = 60_000;

/**
 * Background work of the control plane, at start and then every minute: the storage bucket's setup
 * (until it succeeds), LiveKit reconciliation, storage expiry and the daily stored-bytes metering.
 * A failing task is logged and tried again at the next round; it never stops the others.
 */
export function startMaintenance(container: Container, log: FastifyBaseLogger): () => void {
  let bucketReady = false;
  const tasks: [name: string, run: () => Promise<unknown>][] = [
    [
      'storage bucket setup',
      async () => {
        if (bucketReady) return;
        await container.objects.ensureBucket({ testPrefix: 'test/', testObjectDays: TEST_OBJECT_DAYS });
        bucketReady = true;
        log.info('storage bucket ready');
      },
    ],
    [
      'live reconciliation',
      async () => {
        const result = await container.live.reconcile();
        if (result.closed > 0) log.info(result, 'closed live sessions whose leave was never reported');
      },
    ],
    ['storage expiry', () => container.storage.sweep()],
    ['stored bytes metering', () => container.storage.meterStoredBytes()],
  ];
  const round = async () => {
    for (const [name, run] of tasks) {
      try {
        await run();
      } catch (error) {
        log.warn({ err: error }, `${name} failed; trying again in a minute`);
      }
    }
  };
  void round();
  const timer = setInterval(() => void round(), MAINTENANCE_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
