import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import {
  CHAT_DOMAIN,
  CHAT_MUC_DOMAIN,
  EJABBERD_API_USER,
  EJABBERD_OPERATOR_USER,
  MESSAGING_DOMAIN,
} from '../env-file.js';
import { StackError } from '../errors.js';
import { runChecked } from '../exec.js';
import { ensureDir, writeFileAtomic } from '../files.js';
import { httpOk, tcpListening } from '../health.js';
import { type OsUser, serviceUser } from '../os-user.js';
import { REPO_ROOT } from '../paths.js';
import type { Profile } from '../profile.js';
import { serverEnv } from '../supervisor.js';
import { renderTemplateFile } from '../template.js';
import { waitUntil } from '../wait.js';
import {
  confFileOf,
  dataDirOf,
  instancesOf,
  ownPorts,
  type ServerDefinition,
  type StackContext,
  unitName,
} from './types.js';

const ERL = '/usr/bin/erl';
const ERLC = '/usr/bin/erlc';
const TEMPLATE = join(REPO_ROOT, 'ejabberd', 'ejabberd.yml.template');
/**
 * Our Erlang modules: app scoping (mod_svc_scope), businesses' conversation rooms, the HTTP API's
 * accounts (auth_method svc_api), logins decided by the control plane (auth_method svc_control_plane)
 * and the questions both ask it (svc_control_plane).
 */
const MODULE_SOURCES = [
  'mod_svc_scope',
  'svc_conversations',
  'svc_circles',
  'ejabberd_auth_svc_api',
  'ejabberd_auth_svc_control_plane',
  'svc_control_plane',
  // Distribution without an epmd daemon: how the nodes of a cluster find each other on one host.
  'svc_epmd',
].map((name) => join(REPO_ROOT, 'ejabberd', `${name}.erl`));
const ACCEPT_ALL_AUTH = join(REPO_ROOT, 'ejabberd', 'accept-all-auth.mjs');
const INETRC_SOURCE = '/etc/ejabberd/inetrc';
const LIB_ROOT = '/usr/lib';
const ERLANG_LIB_ROOT = '/usr/lib/erlang/lib';
/** Test profile only: a host with ejabberd's own accounts, a baseline of the login benchmark. */
const BENCH_DOMAIN = 'bench.local';
/** Test profile only: a host whose external auth says yes to anyone, the login benchmark's other baseline. */
const ACCEPT_ALL_DOMAIN = 'accept-all.local';

/**
 * The accept-all host's external-auth worker processes (extauth_pool_size), as many as chat.local had
 * when it used external auth too (docs/decisions.md): the benchmark's baseline stays the one the issue
 * measured against. ejabberd 23.01 (extauth.erl) asks a worker one question at a time.
 */
export const EXTAUTH_POOL_SIZE = 8;

/** The first entry of a dir whose name starts with prefix (a versioned dir such as ejabberd-23.01). */
function findEntry(dir: string, prefix: string): string | undefined {
  const name = readdirSync(dir).find((entry) => entry.startsWith(prefix));
  return name === undefined ? undefined : join(dir, name);
}

/**
 * ejabberd's own dir (ebin, include). Debian installs ejabberd's Erlang applications outside Erlang's
 * lib dir, e.g. /usr/lib/x86_64-linux-gnu/ejabberd-23.01; that parent is erl's ERL_LIBS.
 */
function findEjabberdDir(): string {
  for (const entry of readdirSync(LIB_ROOT, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const found = findEntry(join(LIB_ROOT, entry.name), 'ejabberd-');
    if (found !== undefined) return found;
  }
  throw new StackError(`no ${LIB_ROOT}/*/ejabberd-* directory found (apt-get install ejabberd)`);
}

/**
 * Compiles our Erlang modules into ebinDir unless the beams there were built from the same sources
 * against the same ejabberd and xmpp headers: the stamp file beside them holds the hash of all of it.
 */
async function ensureModules(ebinDir: string): Promise<void> {
  const ejabberdDir = findEjabberdDir();
  const xmppDir = findEntry(ERLANG_LIB_ROOT, 'p1_xmpp-');
  if (xmppDir === undefined)
    throw new StackError(`no ${ERLANG_LIB_ROOT}/p1_xmpp-* directory found (apt-get install ejabberd)`);
  const beams = MODULE_SOURCES.map((source) => basename(source).replace(/\.erl$/, '.beam'));
  const stampFile = join(ebinDir, 'modules.sha256');
  const hash = createHash('sha256');
  for (const source of MODULE_SOURCES) hash.update(readFileSync(source)).update('\0');
  const stamp = hash.update(`${ejabberdDir}\0${xmppDir}`).digest('hex');
  const built = beams.every((beam) => existsSync(join(ebinDir, beam)));
  if (built && existsSync(stampFile) && readFileSync(stampFile, 'utf8').trim() === stamp) return;
  mkdirSync(ebinDir, { recursive: true });
  // A private output dir, so that a failed compile never leaves a half-written beam in place.
  const buildDir = mkdtempSync(join(ebinDir, '.build-'));
  try {
    await runChecked('compiling ejabberd/*.erl', ERLC, [
      // -pa: erlc checks the gen_mod and ejabberd_auth behaviours' callbacks.
      ...['-pa', join(ejabberdDir, 'ebin')],
      ...['-I', join(ejabberdDir, 'include'), '-I', join(xmppDir, 'include')],
      ...['-o', buildDir, ...MODULE_SOURCES],
    ]);
    for (const beam of beams) renameSync(join(buildDir, beam), join(ebinDir, beam));
    writeFileSync(stampFile, `${stamp}\n`);
  } finally {
    rmSync(buildDir, { recursive: true, force: true });
  }
}

/** ejabberd starts extauth_program through /bin/sh -c: quote every word the shell would split. */
function shellWord(word: string): string {
  return /^[\w./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

export function shellCommand(words: readonly string[]): string {
  return words.map(shellWord).join(' ');
}

/** The short name of a node (and of the hidden node that joins them): per profile, and per instance. */
function nodeShortName(profile: Profile, instance?: string): string {
  return instance === undefined ? `svc-${profile}` : `svc-${profile}-${instance}`;
}

/** Per profile, so the profiles' mnesia spools (which embed the node name) never mix. */
function nodeName(profile: Profile, instance?: string): string {
  return `${nodeShortName(profile, instance)}@localhost`;
}

/** The node that joins a cluster's nodes (clusterJoin): it lives for one RPC. */
const JOINER = 'ctl';
/** How long a join may wait for the first node, and take (it copies every replicated table). */
const CLUSTER_JOIN_TIMEOUT_MS = 120_000;

/**
 * SVC_DIST_PORTS for svc_epmd: every node of the profile at its distribution port, the same on each
 * node; in a cluster also the joiner, at the profile's own distribution port.
 */
export function distributionPorts({ profile, ports }: StackContext): string {
  const instances = instancesOf(profile);
  if (instances.length === 0) return `${nodeShortName(profile)}:${ports.ejabberdDistribution}`;
  return [
    ...instances.map(({ name, ports }) => `${nodeShortName(profile, name)}:${ports.ejabberdDistribution}`),
    `${nodeShortName(profile, JOINER)}:${ports.ejabberdDistribution}`,
  ].join(',');
}

/**
 * How every node of the profile (and the joiner) runs Erlang distribution: on loopback, at the ports
 * svc_epmd reads from SVC_DIST_PORTS, with no epmd daemon that could outlive the nodes.
 */
function distributionArgs(ebin: string): string[] {
  // -pa: svc_epmd, and mod_svc_scope and ejabberd_auth_svc_api, which ejabberd.yml loads.
  const loopbackOnly = ['-kernel', 'inet_dist_use_interface', '{127,0,0,1}'];
  return ['-pa', ebin, '-start_epmd', 'false', '-epmd_module', 'svc_epmd', ...loopbackOnly];
}

/**
 * Makes a fresh instance part of the first instance's cluster, as `ejabberdctl join_cluster` does:
 * an RPC from a hidden node. Through the HTTP API the join would stop the very handler running it
 * (join_cluster restarts ejabberd), leaving the node stopped and unjoined. A node that has joined
 * once finds the cluster again by itself after a restart, so this only acts on a fresh spool.
 */
async function joinCluster(context: StackContext): Promise<void> {
  const { profile, instance } = context;
  const seed = instancesOf(profile)[0];
  if (instance === undefined || seed === undefined || instance.index === 0) return;
  const seedContext = { ...context, instance: seed };
  if (!(await waitUntil(() => ejabberd.isHealthy(seedContext), CLUSTER_JOIN_TIMEOUT_MS)))
    throw new StackError(
      `ejabberd node ${seed.name} did not become healthy; node ${instance.name} cannot join it`,
    );
  const node = nodeName(profile, instance.name);
  const seedNode = nodeName(profile, seed.name);
  const rpc = `
    Node = '${node}', Seed = '${seedNode}',
    Result = case rpc:call(Node, ejabberd_cluster, get_nodes, [], 10000) of
        {badrpc, Reason} -> {error, Reason};
        Nodes -> case lists:member(Seed, Nodes) of
            true -> already_joined;
            false -> rpc:call(Node, ejabberd_admin, join_cluster, [atom_to_binary(Seed)], ${CLUSTER_JOIN_TIMEOUT_MS})
        end
    end,
    io:format("~p~n", [Result]),
    halt(case Result of already_joined -> 0; ok -> 0; {ok, _} -> 0; _ -> 1 end).`;
  const { spool, ebin } = files(context);
  await runChecked(
    `joining ejabberd node ${instance.name} to ${seed.name}'s cluster`,
    ERL,
    ['-sname', nodeName(profile, JOINER), '-hidden', '-noinput', ...distributionArgs(ebin), '-eval', rpc],
    // HOME: the node's spool, which holds the cluster's cookie.
    {
      user: serviceUser(ejabberd.osUser),
      env: serverEnv({ HOME: spool, SVC_DIST_PORTS: distributionPorts(context) }),
    },
  );
  // join_cluster restarts ejabberd on the node.
  if (!(await waitUntil(() => ejabberd.isHealthy(context), CLUSTER_JOIN_TIMEOUT_MS)))
    throw new StackError(`ejabberd node ${instance.name} did not come back after joining the cluster`);
}

/**
 * The test profile's benchmark hosts, beside chat.local on one server (bench/chat-logins.ts):
 * bench.local with ejabberd's own accounts (registered with the API's `register`), and
 * accept-all.local whose external auth (ejabberd/accept-all-auth.mjs) accepts any name and password.
 * Their module list replaces the global one with the modules a chat.local session goes through (no
 * MUC service: its host is chat.local's; no admin API).
 */
function benchHostConfig(): string {
  // The modules chat.local's sessions go through (the global list less the API and the MUC
  // service), so that the hosts differ only in how a login is decided. mod_svc_scope without
  // messaging_host: the messaging component delivers to chat.local's accounts only. mod_privacy's
  // caches are the node's, not a host's: the host started last sets their size, and with the default
  // (1,000) they were emptied again and again under chat.local's benchmarks too.
  const modules =
    '{mod_disco: {}, mod_ping: {}, mod_stream_mgmt: {resend_on_timeout: if_offline}, mod_svc_scope: {}, ' +
    'mod_offline: {access_max_user_messages: max_user_offline_messages}, mod_privacy: {cache_size: 100000}, ' +
    'mod_blocking: {}, mod_private: {}, mod_mam: {default: always}}';
  return `
# Test profile only (infra/src/servers/ejabberd.ts): the login benchmark's hosts.
host_config:
  # Accounts of ejabberd's own, stored as a production server stores them: salted SCRAM hashes
  # (never plaintext), so that a PLAIN login derives the key (PBKDF2) as it would in production.
  ${BENCH_DOMAIN}:
    auth_method: internal
    auth_password_format: scram
    modules: ${modules}
  # External auth that says yes to anyone without asking anybody: what a login costs beyond its check.
  ${ACCEPT_ALL_DOMAIN}:
    auth_method: external
    extauth_program: ${JSON.stringify(shellCommand([process.execPath, ACCEPT_ALL_AUTH]))}
    extauth_pool_size: ${EXTAUTH_POOL_SIZE}
    modules: ${modules}
`;
}

export function renderEjabberdConfig(context: StackContext): string {
  const { profile, secrets } = context;
  const ports = ownPorts(context);
  return renderTemplateFile(TEMPLATE, {
    hosts: `[${(profile === 'test' ? [CHAT_DOMAIN, BENCH_DOMAIN, ACCEPT_ALL_DOMAIN] : [CHAT_DOMAIN]).join(', ')}]`,
    host_config: profile === 'test' ? benchHostConfig() : '',
    chat_domain: CHAT_DOMAIN,
    muc_domain: CHAT_MUC_DOMAIN,
    websocket_port: ports.ejabberdWebSocket,
    api_port: ports.ejabberdApi,
    component_port: ports.ejabberdComponent,
    component_secret: secrets.ejabberdComponentSecret,
    messaging_domain: MESSAGING_DOMAIN,
    // Where mod_svc_scope and the auth method ask the control plane (logins, org policy). A JSON
    // string is a valid YAML double-quoted scalar, whatever the path contains.
    control_plane_config: JSON.stringify(files(context).controlPlaneConfig),
    api_user: EJABBERD_API_USER,
    operator_user: EJABBERD_OPERATOR_USER,
  });
}

/** The control plane's internal listener, and ejabberd's secret for it (svc_control_plane). */
export function renderControlPlaneConfig({ ports, secrets }: StackContext): string {
  const config = {
    url: `http://127.0.0.1:${ports.controlPlaneInternal}`,
    secret: secrets.ejabberdAuthSecret,
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

/**
 * The HTTP API's accounts as ejabberd_auth_svc_api reads them: user=sha256 of the secret. The control
 * plane's account runs its few commands; the operator's runs any (docs/stack.md).
 */
export function ejabberdApiAccounts({ secrets }: StackContext): string {
  const digest = (secret: string) => createHash('sha256').update(secret).digest('hex');
  return [
    `${EJABBERD_API_USER}=${digest(secrets.ejabberdApiSecret)}`,
    `${EJABBERD_OPERATOR_USER}=${digest(secrets.ejabberdOperatorSecret)}`,
  ].join(',');
}

function files(context: StackContext) {
  // ejabberd writes its own log files (ejabberd.log, error.log) into a dir it must own;
  // its console output, the same lines, goes to logs/ejabberd.log like every server's.
  const ownLogDir = join(context.paths.logsDir, unitName('ejabberd', context.instance?.name));
  return {
    spool: dataDirOf(context, 'ejabberd'),
    ownLogDir,
    config: confFileOf(context, 'ejabberd.yml'),
    inetrc: confFileOf(context, 'inetrc'),
    controlPlaneConfig: confFileOf(context, 'control-plane.json'),
    // Our modules' beams, compiled by prepare(); shared by the profiles like every built binary.
    // Not named ejabberd*: OTP would take a code path dir of that name for ejabberd's own lib dir.
    ebin: join(context.paths.binDir, 'mod_svc_scope'),
  };
}

/**
 * Writes the control plane's settings readable by ejabberd but owned by the runner (0640, group
 * ejabberd), then reads them (and, in the test profile, runs the benchmark's accept-all program) once
 * as ejabberd: a file it cannot read fails here, by name, instead of failing ejabberd's start later.
 */
async function prepareControlPlaneAccess(context: StackContext, user: OsUser | undefined): Promise<void> {
  const { controlPlaneConfig } = files(context);
  // The runner (root) keeps the file; ejabberd reads it through its group and cannot change it.
  const owner = user && { ...user, uid: process.getuid?.() ?? 0 };
  writeFileAtomic(controlPlaneConfig, renderControlPlaneConfig(context), owner, 0o640);
  await runChecked(
    "checking that the ejabberd user can read the control plane's settings",
    process.execPath,
    ['-e', 'require("node:fs").readFileSync(process.argv[1])', controlPlaneConfig],
    { user, input: '' },
  );
  if (context.profile === 'test')
    await runChecked(
      "checking that the ejabberd user can run the benchmark's accept-all auth",
      process.execPath,
      [ACCEPT_ALL_AUTH],
      { user, input: '' },
    );
}

export const ejabberd: ServerDefinition = {
  name: 'ejabberd',
  aptPackages: ['ejabberd', 'erlang-base'],
  osUser: 'ejabberd',
  // The Erlang VM answers SIGTERM with init:stop, a clean shutdown that closes mnesia. It stops every
  // room process in turn: tens of thousands of persistent rooms (businesses' conversations) take
  // longer than 15 s, and a kill would skip mnesia's clean close.
  stopSignal: 'SIGTERM',
  stopTimeoutMs: 120_000,
  ports: ['ejabberdWebSocket', 'ejabberdApi', 'ejabberdComponent', 'ejabberdDistribution'],
  replicated: true,
  url: (context) => `ws://127.0.0.1:${ownPorts(context).ejabberdWebSocket}/ws`,

  async prepare(context, user) {
    const { spool, ownLogDir, config, inetrc, ebin } = files(context);
    ensureDir(spool, user, 0o700);
    ensureDir(ownLogDir, user);
    // The nodes of a cluster share it; ours rather than one the VM makes up, so that they can.
    writeFileAtomic(join(spool, '.erlang.cookie'), context.secrets.ejabberdCookie, user, 0o400);
    await ensureModules(ebin);
    await prepareControlPlaneAccess(context, user);
    writeFileAtomic(config, renderEjabberdConfig(context), user);
    // Without it every name lookup of the VM logs an "inet_config ... not found" report.
    writeFileAtomic(inetrc, readFileSync(INETRC_SOURCE, 'utf8'), user, 0o644);
  },

  /**
   * erl itself rather than ejabberdctl: ejabberdctl re-executes through su as root, which puts the
   * VM in another session where signals to our pid no longer reach it.
   */
  launch(context) {
    const { spool, ownLogDir, config, inetrc, ebin } = files(context);
    return {
      command: ERL,
      args: [
        '-sname',
        nodeName(context.profile, context.instance?.name),
        '-noinput',
        ...distributionArgs(ebin),
        '-mnesia',
        'dir',
        JSON.stringify(spool),
        '-s',
        'ejabberd',
      ],
      env: serverEnv({
        // The VM reads .erlang.cookie from HOME.
        HOME: spool,
        SVC_DIST_PORTS: distributionPorts(context),
        EJABBERD_CONFIG_PATH: config,
        EJABBERD_LOG_PATH: join(ownLogDir, 'ejabberd.log'),
        ERL_CRASH_DUMP: join(ownLogDir, 'erl_crash.dump'),
        ERL_LIBS: dirname(findEjabberdDir()),
        ERL_INETRC: inetrc,
        SVC_EJABBERD_API_ACCOUNTS: ejabberdApiAccounts(context),
      }),
      cwd: spool,
    };
  },

  // The API answers, and the control plane's component listener accepts connections: the control
  // plane, started next, connects to both.
  async isHealthy(context) {
    const ports = ownPorts(context);
    const status = await httpOk(`http://127.0.0.1:${ports.ejabberdApi}/api/status`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    return status && (await tcpListening(ports.ejabberdComponent));
  },

  afterHealthy: joinCluster,
};
