import { loadSettings } from '../src/config/load.js';
import { runMigrations } from '../src/db/migrate.js';
import { createDatabasePool } from '../src/db/pool.js';

/** Brings the test database to the latest schema once, before any integration test file runs. */
export default async function setup(): Promise<void> {
  const settings = loadSettings(process.env);
  const pool = await createDatabasePool(settings.SVC_DATABASE_URL);
  try {
    await runMigrations(pool);
  } finally {
    await pool.end();
  }
}
