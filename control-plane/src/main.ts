import type { FastifyBaseLogger } from 'fastify';
import { buildApp } from './app.js';
import { ConfigError, loadSettings } from './config/load.js';
import { createContainer } from './container.js';
import { runMigrations } from './db/migrate.js';

/** LiveKit leaves that could not be reported are made good at start and then every minute. */
const RECONCILE_EVERY_MS = 60_000;

function startLiveReconciler(container: Awaited<ReturnType<typeof createContainer>>, log: FastifyBaseLogger) {
  const run = () =>
    container.live.reconcile().then(
      (result) => {
        if (result.closed > 0) log.info(result, 'closed live sessions whose leave was never reported');
      },
      (error: unknown) => log.warn({ err: error }, 'live reconciliation failed; next try in a minute'),
    );
  void run();
  const timer = setInterval(run, RECONCILE_EVERY_MS);
  timer.unref();
  return timer;
}

async function main(): Promise<void> {
  let settings: ReturnType<typeof loadSettings>;
  try {
    settings = loadSettings(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`control plane: ${error.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw error;
  }

  const container = await createContainer(settings);
  const app = await buildApp(container);
  const applied = await runMigrations(container.pool);
  if (applied.length > 0) app.log.info({ migrations: applied }, 'migrations applied');
  await app.listen({ host: settings.SVC_HOST, port: settings.SVC_PORT });
  const reconciler = startLiveReconciler(container, app.log);

  let stopping = false;
  const shutdown = async (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down: draining in-flight requests');
    const force = setTimeout(() => {
      app.log.error('grace period over; exiting with requests still in flight');
      process.exit(1);
    }, settings.SVC_SHUTDOWN_GRACE_MS);
    force.unref();
    clearInterval(reconciler);
    await app.close();
    await container.close();
    process.exit(0);
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);
}

main().catch((error: unknown) => {
  process.stderr.write(
    `control plane failed to start: ${error instanceof Error ? error.stack : String(error)}\n`,
  );
  process.exit(1);
});
