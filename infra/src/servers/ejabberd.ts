import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CHAT_DOMAIN, CHAT_MUC_DOMAIN } from '../env-file.js';
import { StackError } from '../errors.js';
import { ensureDir, writeFileAtomic } from '../files.js';
import { httpOk } from '../health.js';
import { REPO_ROOT } from '../paths.js';
import type { PortMap } from '../ports.js';
import type { Profile } from '../profile.js';
import { serverEnv } from '../supervisor.js';
import { renderTemplateFile } from '../template.js';
import { dataDirOf, type ServerDefinition, type StackContext } from './types.js';

const ERL = '/usr/bin/erl';
const TEMPLATE = join(REPO_ROOT, 'ejabberd', 'ejabberd.yml.template');
const INETRC_SOURCE = '/etc/ejabberd/inetrc';
const LIB_ROOT = '/usr/lib';

/** Debian installs ejabberd's Erlang applications outside Erlang's own lib dir, e.g. /usr/lib/x86_64-linux-gnu. */
function findErlLibs(): string {
  for (const entry of readdirSync(LIB_ROOT, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const dir = join(LIB_ROOT, entry.name);
    if (readdirSync(dir).some((name) => name.startsWith('ejabberd-'))) return dir;
  }
  throw new StackError(`no ${LIB_ROOT}/*/ejabberd-* directory found (apt-get install ejabberd)`);
}

/** Per profile, so the two profiles' mnesia spools (which embed the node name) never mix. */
function ejabberdNodeName(profile: Profile): string {
  return `svc-${profile}@localhost`;
}

export function renderEjabberdConfig(ports: PortMap): string {
  return renderTemplateFile(TEMPLATE, {
    chat_domain: CHAT_DOMAIN,
    muc_domain: CHAT_MUC_DOMAIN,
    websocket_port: ports.ejabberdWebSocket,
    api_port: ports.ejabberdApi,
  });
}

function files(context: StackContext) {
  // ejabberd writes its own log files (ejabberd.log, error.log) into a dir it must own;
  // its console output, the same lines, goes to logs/ejabberd.log like every server's.
  const ownLogDir = join(context.paths.logsDir, 'ejabberd');
  return {
    spool: dataDirOf(context, 'ejabberd'),
    ownLogDir,
    config: join(context.paths.confDir, 'ejabberd.yml'),
    inetrc: join(context.paths.confDir, 'inetrc'),
  };
}

export const ejabberd: ServerDefinition = {
  name: 'ejabberd',
  aptPackages: ['ejabberd', 'erlang-base'],
  osUser: 'ejabberd',
  // The Erlang VM answers SIGTERM with init:stop, a clean shutdown that closes mnesia.
  stopSignal: 'SIGTERM',
  ports: ['ejabberdWebSocket', 'ejabberdApi', 'ejabberdDistribution'],
  url: ({ ports }) => `ws://127.0.0.1:${ports.ejabberdWebSocket}/ws`,

  async prepare(context, user) {
    const { spool, ownLogDir, config, inetrc } = files(context);
    ensureDir(spool, user, 0o700);
    ensureDir(ownLogDir, user);
    writeFileAtomic(config, renderEjabberdConfig(context.ports), user);
    // Without it every name lookup of the VM logs an "inet_config ... not found" report.
    writeFileAtomic(inetrc, readFileSync(INETRC_SOURCE, 'utf8'), user, 0o644);
  },

  /**
   * erl itself rather than ejabberdctl: ejabberdctl re-executes through su as root, which puts the
   * VM in another session where signals to our pid no longer reach it.
   */
  launch(context) {
    const { spool, ownLogDir, config, inetrc } = files(context);
    return {
      command: ERL,
      args: [
        '-sname',
        ejabberdNodeName(context.profile),
        '-noinput',
        // Distribution on a fixed loopback port without epmd: nothing outlives the node.
        '-start_epmd',
        'false',
        '-erl_epmd_port',
        String(context.ports.ejabberdDistribution),
        '-kernel',
        'inet_dist_use_interface',
        '{127,0,0,1}',
        '-mnesia',
        'dir',
        JSON.stringify(spool),
        '-s',
        'ejabberd',
      ],
      env: serverEnv({
        // The VM writes .erlang.cookie into HOME.
        HOME: spool,
        EJABBERD_CONFIG_PATH: config,
        EJABBERD_LOG_PATH: join(ownLogDir, 'ejabberd.log'),
        ERL_CRASH_DUMP: join(ownLogDir, 'erl_crash.dump'),
        ERL_LIBS: findErlLibs(),
        ERL_INETRC: inetrc,
      }),
      cwd: spool,
    };
  },

  isHealthy: ({ ports }) =>
    httpOk(`http://127.0.0.1:${ports.ejabberdApi}/api/status`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    }),
};
