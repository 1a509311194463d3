import type { FastifyBaseLogger } from 'fastify';
import { requireRedisVersion } from './adapters/redis.js';
import { buildApp } from './app.js';
import { ConfigError, loadSettings } from './config/load.js';
import { createContainer } from './container.js';
import { runMigrations } from './db/migrate.js';
import { createHttpMetrics } from './http/metrics.js';
import { startMaintenance } from './maintenance.js';
import { ServiceError } from './platform/errors.js';

/** What went wrong, for the operator: a service error's detail, which its public message leaves out. */
const causeOf = (error: unknown) =>
  error instanceof ServiceError && error.detail
    ? error.detail
    : error instanceof Error
      ? error.message
      : String(error);

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

  let log: FastifyBaseLogger | undefined;
  const container = await createContainer(settings, {
    onError: (error) =>
      log?.warn({ err: error }, 'a notice after a commit failed; its safety net will catch up'),
    // The app's logger exists once the app does; the webhook worker starts after that.
    log: {
      info: (object, message) => log?.info(object, message),
      warn: (object, message) => log?.warn(object, message),
      error: (object, message) => log?.error(object, message),
    },
  });
  // Two listeners on one set of services: the public API, and the bundled servers' callbacks with
  // /metrics on an address that is never published (loopback, or the internal network in compose).
  const metrics = createHttpMetrics();
  const app = await buildApp(container, { metrics });
  const internal = await buildApp(container, { metrics, listener: 'internal' });
  log = app.log;
  // A missing ffmpeg is a clear refusal to start, not a 503 on the first published moment.
  const tools = await container.media.checkTools().catch((error: unknown) => {
    throw new Error(
      `ffmpeg and the ffprobe of SVC_FFPROBE_PATH (${settings.SVC_FFPROBE_PATH}) are needed; Debian: apt-get install ffmpeg, and infra/media/build-ffprobe.sh builds the stacks' own ffprobe: ${causeOf(error)}`,
    );
  });
  app.log.info(tools, 'media tools found');
  const redisVersion = requireRedisVersion(await container.redis.info('server'));
  app.log.info({ redisVersion }, 'redis version accepted');
  const applied = await runMigrations(container.pool);
  if (applied.length > 0) app.log.info({ migrations: applied }, 'migrations applied');
  await internal.listen({ host: settings.SVC_INTERNAL_HOST, port: settings.SVC_INTERNAL_PORT });
  await app.listen({ host: settings.SVC_HOST, port: settings.SVC_PORT });
  const stopMaintenance = startMaintenance(container, app.log);

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
    // The workers take no new work from now on, while the requests in flight finish; what all of
    // them accrued is flushed last.
    await Promise.all([app.close(), internal.close(), stopMaintenance()]);
    await container.accrual
      .flush()
      .catch((error: unknown) => app.log.warn({ err: error }, 'final flush failed'));
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
