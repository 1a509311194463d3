import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { EJABBERD_OPERATOR_USER, loadProfileEnv } from '../env-file.js';
import { StackError, UsageError } from '../errors.js';
import { serviceUser } from '../os-user.js';
import { type Profile, parseProfile } from '../profile.js';
import { ejabberd } from '../servers/ejabberd.js';
import { dataDirOf, instancesOf } from '../servers/types.js';
import { createContext } from '../stack.js';
import { type BucketSettings, backupBucket, restoreBucket, verifyObjects } from './bucket.js';
import { backupChatCredentials, restoreChatCredentials } from './chat-credentials.js';
import { accountCount, dumpDatabase, libpqEnv, replaceDatabase, type TableRows } from './database.js';
import { backupEjabberd, type EjabberdTarget, restoreEjabberd } from './ejabberd-data.js';
import { digestOfFile, readManifest, sealingKeyDigest, verifyFile, writeManifest } from './manifest.js';

const BACKUP_USAGE = `usage: npm run backup -- [--profile dev|test] [--to DIR]

Writes one directory (default .stack/<profile>/backups/<UTC time>): a pg_dump of the profile's
database, every object of its bucket, ejabberd's data, the live chat credentials and manifest.json.`;

const RESTORE_USAGE = `usage: npm run restore -- --from DIR [--profile dev|test] [--force]

Restores a backup into the profile's running stack. Refuses a database that holds accounts, or a stack
whose SVC_SEALING_KEY is not the backup's, unless --force is given. Docs: docs/operations.md.`;

const DATABASE_FILE = 'database.pgdump';
const EJABBERD_FILE = 'ejabberd.dump';
const CHAT_CREDENTIALS_FILE = 'chat-credentials.jsonl';

/** What backup and restore reach in a profile's running stack, from its control-plane.env and secrets. */
interface StackTarget {
  profile: Profile;
  secretsFile: string;
  backupsDir: string;
  /** libpq's environment for the control plane's role. */
  databaseEnv: NodeJS.ProcessEnv;
  bucket: BucketSettings;
  redisUrl: string;
  ejabberd: EjabberdTarget;
  sealingKey: string;
}

/**
 * The profile's servers as its last "stack up" wrote them down. Never the SVC_* variables of the
 * environment: a restore must not land in whatever stack a shell happens to point at.
 */
function stackTarget(profile: Profile): StackTarget {
  const settings = loadProfileEnv(profile);
  const context = createContext(profile);
  const setting = (name: string): string => {
    const value = settings[name];
    if (!value)
      throw new StackError(
        `${context.paths.envFile} has no ${name}: run npm run stack -- up --profile ${profile} again`,
      );
    return value;
  };
  return {
    profile,
    secretsFile: context.paths.secretsFile,
    backupsDir: context.paths.backupsDir,
    databaseEnv: libpqEnv(setting('SVC_DATABASE_URL')),
    bucket: {
      endpoint: setting('SVC_S3_ENDPOINT'),
      region: setting('SVC_S3_REGION'),
      accessKey: setting('SVC_S3_ACCESS_KEY'),
      secretKey: setting('SVC_S3_SECRET_KEY'),
      bucket: setting('SVC_S3_BUCKET'),
    },
    redisUrl: setting('SVC_REDIS_URL'),
    ejabberd: {
      apiUrl: setting('SVC_EJABBERD_API_URL'),
      operatorCredential: `${EJABBERD_OPERATOR_USER}@${setting('SVC_CHAT_DOMAIN')}:${context.secrets.ejabberdOperatorSecret}`,
      // Where the node the API call reaches can write its dump: in a cluster, the first node's spool
      // (every node runs as the same OS user, and every node holds every table).
      spoolDir: dataDirOf({ ...context, instance: instancesOf(profile)[0] }, 'ejabberd'),
      osUser: serviceUser(ejabberd.osUser),
    },
    sealingKey: setting('SVC_SEALING_KEY'),
  };
}

const BACKUP_OPTIONS = {
  profile: { type: 'string' },
  to: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

const RESTORE_OPTIONS = {
  profile: { type: 'string' },
  from: { type: 'string' },
  force: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** parseArgs's complaint as a usage error (exit 2), with the usage below it. */
function parsed<T>(parse: () => T, usage: string): T {
  try {
    return parse();
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n\n${usage}`);
  }
}

/** One line of what a command did: a label, then the facts. */
function report(label: string, facts: string): void {
  console.log(`${label.padEnd(9)} ${facts}`);
}

const megabytes = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MB`;
const seconds = (sinceMs: number) => `${((Date.now() - sinceMs) / 1000).toFixed(1)} s`;
const sum = (counts: Record<string, number>) =>
  Object.values(counts).reduce((total, count) => total + count, 0);
const tablesAndRows = (rows: TableRows) => `${Object.keys(rows).length} tables, ${sum(rows)} rows`;

/** 20261124T152003Z: sortable, and without the colons some tools mistake for a host. */
const compactUtc = (date: Date) =>
  date
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d+Z$/, 'Z');

/** `npm run backup`: everything the profile's stack holds that a reinstall would lose. */
export async function backupCommand(args: readonly string[]): Promise<number> {
  const { values } = parsed(() => parseArgs({ args: [...args], options: BACKUP_OPTIONS }), BACKUP_USAGE);
  if (values.help) {
    console.log(BACKUP_USAGE);
    return 0;
  }
  const profile = parseProfile(values.profile);
  const target = stackTarget(profile);
  const startedAt = new Date();
  const dir = resolve(values.to ?? join(target.backupsDir, compactUtc(startedAt)));
  if (existsSync(dir) && readdirSync(dir).length > 0)
    throw new UsageError(`${dir} is not empty: a backup goes into a new or empty directory`);
  const created = !existsSync(dir);
  // The dump holds every customer's data and key hashes: the runner's user alone may read it.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  try {
    // The database, then the bucket: an object newer than the snapshot is then only extra (the restored
    // control plane removes bytes without a record), where the other order would lose recent uploads.
    const database = await dumpDatabase(target.databaseEnv, join(dir, DATABASE_FILE));
    const databaseFile = await digestOfFile(dir, DATABASE_FILE);
    report(
      'database',
      `migration ${database.migration}, ${tablesAndRows(database.rows)}, ${megabytes(databaseFile.bytes)} (snapshot of ${database.snapshotAt})`,
    );
    const { vanished, ...objects } = await backupBucket(target.bucket, dir);
    report(
      'objects',
      `${objects.count} objects, ${megabytes(objects.totalBytes)} from bucket ${objects.bucket}` +
        (vanished > 0 ? ` (${vanished} deleted while the backup ran)` : ''),
    );
    const ejabberdData = await backupEjabberd(target.ejabberd, dir, EJABBERD_FILE);
    report(
      'ejabberd',
      `${sum(ejabberdData.records)} records (rooms, offline messages, archives, bookmarks…)`,
    );
    const chatCredentials = await backupChatCredentials(target.redisUrl, dir, CHAT_CREDENTIALS_FILE);
    report('chat', `${chatCredentials.count} live credentials`);
    writeManifest(dir, {
      profile,
      startedAt: startedAt.toISOString(),
      finishedAt: new Date().toISOString(),
      sealingKeyDigest: sealingKeyDigest(target.sealingKey),
      database: { ...databaseFile, ...database },
      objects,
      ejabberd: ejabberdData,
      chatCredentials,
    });
  } catch (error) {
    if (created) rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  console.log(`backup of the ${profile} stack written to ${dir} in ${seconds(startedAt.getTime())}`);
  return 0;
}

/** `npm run restore`: a backup into the profile's running stack, refused where it would destroy data. */
export async function restoreCommand(args: readonly string[]): Promise<number> {
  const { values } = parsed(() => parseArgs({ args: [...args], options: RESTORE_OPTIONS }), RESTORE_USAGE);
  if (values.help) {
    console.log(RESTORE_USAGE);
    return 0;
  }
  if (values.from === undefined) throw new UsageError(`--from DIR is missing\n\n${RESTORE_USAGE}`);
  const startedAt = Date.now();
  const profile = parseProfile(values.profile);
  const dir = resolve(values.from);
  const manifest = readManifest(dir);
  const target = stackTarget(profile);
  const force = values.force === true;

  // The refusals first: they need no more than a query.
  const accounts = await accountCount(target.databaseEnv);
  if (accounts > 0 && !force)
    throw new UsageError(
      `restore refused: the ${profile} stack's database holds ${accounts} accounts, and a restore replaces ` +
        'the whole database. Restore into an empty stack, or pass --force to replace them.',
    );
  if (sealingKeyDigest(target.sealingKey) !== manifest.sealingKeyDigest && !force)
    throw new UsageError(
      `restore refused: the ${profile} stack's SVC_SEALING_KEY is not the backed-up stack's, so the webhook ` +
        `signing secrets in the backup would not open. Copy "sealingKey" from the backed-up profile's ` +
        `secrets.json into ${target.secretsFile} and run npm run stack -- up --profile ${profile}; or pass ` +
        "--force and rotate every webhook endpoint's secret afterwards.",
    );

  // Every byte checked before anything changes.
  await verifyFile(dir, manifest.database);
  await verifyObjects(dir, manifest.objects);
  await verifyFile(dir, manifest.ejabberd);
  await verifyFile(dir, manifest.chatCredentials);
  report(
    'backup',
    `${dir} verified (the ${manifest.profile} stack, snapshot of ${manifest.database.snapshotAt}, migration ${manifest.database.migration})`,
  );

  const rows = await replaceDatabase(
    target.databaseEnv,
    join(dir, manifest.database.file),
    manifest.database.rows,
  );
  report('database', `replaced: ${tablesAndRows(rows)}, as the manifest counts them`);
  const objects = await restoreBucket(target.bucket, dir);
  if (objects.count !== manifest.objects.count || objects.totalBytes !== manifest.objects.totalBytes)
    throw new StackError(
      `uploaded ${objects.count} objects of ${objects.totalBytes} bytes, the manifest lists ${manifest.objects.count} of ${manifest.objects.totalBytes}`,
    );
  report(
    'objects',
    `${objects.count} objects, ${megabytes(objects.totalBytes)} uploaded to bucket ${target.bucket.bucket}`,
  );
  await restoreEjabberd(target.ejabberd, dir, manifest.ejabberd.file);
  report('ejabberd', `${sum(manifest.ejabberd.records)} records loaded`);
  const chat = await restoreChatCredentials(target.redisUrl, dir, manifest.chatCredentials.file);
  report(
    'chat',
    `${chat.restored} live credentials restored` +
      (chat.expired > 0 ? `, ${chat.expired} expired since the backup` : ''),
  );
  console.log(
    `restored into the ${profile} stack in ${seconds(startedAt)}. The control plane caches for up to a minute; ` +
      `to serve the restored data at once, restart it: npm run stack -- down --profile ${profile} --only control-plane, then npm run stack -- up --profile ${profile}`,
  );
  return 0;
}
